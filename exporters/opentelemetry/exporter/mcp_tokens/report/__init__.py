# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The mcp-tokens report: a metrics exporter that writes a run's token economics at shutdown.

    opentelemetry-instrument --metrics_exporter mcp_tokens_report python my_server.py

Modules: `exporter` (the `MetricExporter`, registered as the `mcp_tokens_report` entry point),
`state` (the latest cumulative series), `series` (series and histograms, from OpenTelemetry or
Prometheus), `rows` (per operation, budget, definition and side), `model` (the report built
from a snapshot, and its verdict), `economics` (unused tools, cost), `layout` and `render_*`
(terminal, text, Markdown, HTML, JSON), `output` (writing), `settings`
(`OTEL_EXPORTER_MCP_TOKENS_REPORT_*`), `exit_status` (the fail-on exit code),
`prometheus` (series from a `/metrics` page, for `mcp-tokens top`). See docs/report.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["McpTokensReportExporter"]


def __getattr__(name: str) -> Any:
    # Lazy: importing the exporter registers its exit hook, which `mcp-tokens top` (it imports
    # the model) must not.
    if name == "McpTokensReportExporter":
        from .exporter import McpTokensReportExporter  # noqa: PLC0415

        return McpTokensReportExporter
    raise AttributeError(name)
