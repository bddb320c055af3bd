# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Prometheus names of the telemetry contract, derived from the instrumentation's own.

The instrumentation defines OpenTelemetry names (``mcp_tokens.payload``,
``mcp_tokens.side``) in `semconv`; opentelemetry-exporter-prometheus turns every
character outside ``[a-zA-Z0-9]`` into ``_`` (``[a-zA-Z0-9:]`` for metric names), adds
``_seconds`` for unit ``s``, drops curly-brace units and unit ``1``, and appends
``_total`` to counters and ``_bucket``/``_sum``/``_count`` to histograms. Deriving the
names here, instead of retyping them, makes a rename in the contract show up as a
changed dashboard (and a failing regeneration check) rather than as a silent empty panel.
"""

from __future__ import annotations

import re
from typing import Final

from opentelemetry.instrumentation.mcp_tokens import semconv


def prometheus_label(attribute: str) -> str:
    """The Prometheus label name of an OpenTelemetry attribute key."""
    return re.sub(r"[^a-zA-Z0-9]+", "_", attribute)


def prometheus_metric(name: str, unit_suffix: str = "") -> str:
    """The Prometheus metric family name of an OpenTelemetry instrument."""
    base = re.sub(r"[^a-zA-Z0-9:]+", "_", name)
    return f"{base}_{unit_suffix}" if unit_suffix else base


# --- labels -------------------------------------------------------------------------------
JOB: Final = "job"
SIDE: Final = prometheus_label(semconv.SIDE)
DIRECTION: Final = prometheus_label(semconv.DIRECTION)
METHOD: Final = prometheus_label(semconv.MCP_METHOD_NAME)
TOOL: Final = prometheus_label(semconv.GEN_AI_TOOL_NAME)
PROMPT: Final = prometheus_label(semconv.GEN_AI_PROMPT_NAME)
SERVER: Final = prometheus_label(semconv.SERVER_NAME)
OVERHEAD_KIND: Final = prometheus_label(semconv.OVERHEAD_KIND)
RISK: Final = prometheus_label(semconv.TOKENS_RISK)
BUDGET_LEVEL: Final = prometheus_label(semconv.BUDGET_LEVEL)
PADDING_REASON: Final = prometheus_label(semconv.PADDING_REASON)
SKIP_REASON: Final = prometheus_label(semconv.SKIP_REASON)
GUARD_ACTION: Final = prometheus_label(semconv.GUARD_ACTION)
GUARD_REASON: Final = prometheus_label(semconv.GUARD_REASON)
GUARD_FAILURE: Final = prometheus_label(semconv.GUARD_FAILURE)
HOST: Final = prometheus_label(semconv.HOST)
HOST_LIMIT: Final = prometheus_label(semconv.HOST_LIMIT)
LE: Final = "le"

# --- label values ------------------------------------------------------------------------
TOOLS_CALL: Final = "tools/call"
RESPONSE: Final = semconv.DIRECTION_RESPONSE
REQUEST: Final = semconv.DIRECTION_REQUEST
SIDES: Final = (semconv.SIDE_CLIENT, semconv.SIDE_SERVER)
# The guard's actions that change what the model receives (`warned` does not).
GUARD_CUTS: Final = (semconv.GUARD_TRUNCATED, semconv.GUARD_REJECTED)

# --- metric families (histograms get _bucket/_sum/_count, counters _total) ---------------
CLIENT_OPERATION_DURATION: Final = prometheus_metric(semconv.CLIENT_OPERATION_DURATION, "seconds")
SERVER_OPERATION_DURATION: Final = prometheus_metric(semconv.SERVER_OPERATION_DURATION, "seconds")
PAYLOAD: Final = prometheus_metric(semconv.PAYLOAD)
OVERHEAD_TOTAL: Final = prometheus_metric(semconv.OVERHEAD) + "_total"
RESPONSES_TOTAL: Final = prometheus_metric(semconv.RESPONSES) + "_total"
TOOL_DEFINITION: Final = prometheus_metric(semconv.TOOL_DEFINITION)
BUDGET_UTILIZATION: Final = prometheus_metric(semconv.BUDGET_UTILIZATION_METRIC)
# The OTLP path into Prometheus (Collector, OTLP receiver) adds _ratio to unit-1 metrics.
BUDGET_UTILIZATION_OTLP: Final = BUDGET_UTILIZATION + "_ratio"
BUDGET_CROSSINGS_TOTAL: Final = prometheus_metric(semconv.BUDGET_CROSSINGS) + "_total"
PADDING_DETECTIONS_TOTAL: Final = prometheus_metric(semconv.PADDING_DETECTIONS) + "_total"
ANALYSIS_DURATION: Final = prometheus_metric(semconv.ANALYSIS_DURATION, "seconds")
ANALYSIS_SKIPPED_TOTAL: Final = prometheus_metric(semconv.ANALYSIS_SKIPPED) + "_total"
GUARD_ACTIONS_TOTAL: Final = prometheus_metric(semconv.GUARD_ACTIONS) + "_total"
GUARD_REMOVED_TOTAL: Final = prometheus_metric(semconv.GUARD_REMOVED) + "_total"
GUARD_FAILURES_TOTAL: Final = prometheus_metric(semconv.GUARD_FAILURES) + "_total"
HOST_OVER_LIMIT_TOTAL: Final = prometheus_metric(semconv.HOST_OVER_LIMIT) + "_total"
TOOLS: Final = prometheus_metric(semconv.TOOLS)
