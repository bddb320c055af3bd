# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Grafana dashboards, Prometheus rules, Grafana-managed alerts and a runbook for mcp-tokens.

Everything under the repository's ``dashboards/`` directory is generated here, from
typed Python builders and one list of alert definitions, so the Prometheus alerts, their
Grafana-managed twins and the runbook can never drift apart::

    python -m opentelemetry.exporter.mcp_tokens.dashboards --out dashboards/
    python -m opentelemetry.exporter.mcp_tokens.dashboards --out dashboards/ --check

Thresholds default to the instrumentation's own (risk tiers, budget levels, context
window); pass the same values to both when you change them. From code::

    from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings, write_all

    write_all(Path("out"), GeneratorSettings(context_window=128_000))

`all_expressions()` lists every PromQL expression of every panel and rule, and
`substitute()` fills in the dashboard variables, for checks against a live Prometheus;
``GeneratorSettings(timing=AlertTiming.fast())`` renders alerts that fire within seconds.
"""

from __future__ import annotations

from .expressions import PromQLExpression, all_expressions, substitute
from .generate import render_all, stale_files, write_all
from .settings import AlertTiming, GeneratorSettings

__all__ = [
    "AlertTiming",
    "GeneratorSettings",
    "PromQLExpression",
    "all_expressions",
    "render_all",
    "stale_files",
    "substitute",
    "write_all",
]
