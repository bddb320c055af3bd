# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""MCP tokens / Tool drill-down: one tool's tokens, risk, overhead, latency and padding."""

from __future__ import annotations

from . import names
from .dashboard_common import (
    JOB,
    LINK_TAG,
    REQUEST,
    RESPONSE,
    RISK_COLORS,
    SERVER,
    SIDE,
    TAGS,
    TOOL,
    TOOL_UID,
    TOOLS_CALL,
    common_variables,
    risk_steps,
    tool_variable,
)
from .dashboard_guard import guardrails_tool
from .model import Dashboard, Panel, Row, Step, Target
from .promql import RATE_INTERVAL, increase, quantile, rate, series, sum_by
from .settings import GeneratorSettings

_CALLS = [JOB, SIDE, SERVER, TOOLS_CALL, TOOL]
_PERCENTILES = (0.5, 0.95, 0.99)


def tool_dashboard(settings: GeneratorSettings) -> Dashboard:
    return Dashboard(
        uid=TOOL_UID,
        title="MCP tokens / Tool drill-down",
        description=(
            "One MCP tool: request and response tokens, risk tiers, overhead, call duration "
            "(semantic-convention histograms) and padding findings."
        ),
        tags=TAGS,
        variables=(*common_variables(), tool_variable()),
        rows=(
            Row("Tokens and latency", _tokens(settings)),
            Row("Risk, overhead and padding", _quality(settings)),
            Row("Guardrails", guardrails_tool()),
        ),
        links_tag=LINK_TAG,
    )


def _token_percentiles(direction: str) -> tuple[Target, ...]:
    buckets = series(f"{names.PAYLOAD}_bucket", [*_CALLS, direction])
    return tuple(
        Target(
            quantile(q, (names.SIDE,), buckets, RATE_INTERVAL),
            legend=f"p{round(q * 100)} ({{{{mcp_tokens_side}}}})",
        )
        for q in _PERCENTILES
    )


def _durations() -> tuple[Target, ...]:
    # The semconv duration histograms carry no server name or side label: the metric
    # name is the side, and the tool name narrows it down.
    targets: list[Target] = []
    for side, metric in (
        ("server", names.SERVER_OPERATION_DURATION),
        ("client", names.CLIENT_OPERATION_DURATION),
    ):
        buckets = series(f"{metric}_bucket", [JOB, TOOLS_CALL, TOOL])
        targets.extend(
            Target(quantile(q, (), buckets, RATE_INTERVAL), legend=f"{side} p{round(q * 100)}")
            for q in (0.5, 0.95)
        )
    return tuple(targets)


def _tokens(settings: GeneratorSettings) -> tuple[Panel, ...]:
    risk = settings.risk
    return (
        Panel(
            title="Response tokens (p50, p95, p99)",
            description=(
                "Percentiles of this tool's result size in tokens, as the model receives it. Dashed "
                f"lines mark the risk tiers ({risk.low}, {risk.medium}, {risk.high}). p95 above the "
                "red line pages (McpToolResponsesCritical): paginate, truncate with a notice, or "
                "split the tool."
            ),
            kind="timeseries",
            unit="short",
            targets=_token_percentiles(RESPONSE),
            steps=risk_steps(settings),
            threshold_lines=True,
        ),
        Panel(
            title="Tool call duration (p50, p95)",
            description=(
                "Duration of tools/call for this tool from the MCP semantic-convention histograms, "
                "server side and client side, next to the token sizes. Large responses that are "
                "also slow are the first to paginate; slow small ones point at the tool's backend."
            ),
            kind="timeseries",
            unit="s",
            targets=_durations(),
        ),
        Panel(
            title="Request tokens (p50, p95, p99)",
            description=(
                "Percentiles of the tool-call arguments in tokens. Arguments are written by the "
                "model and are usually small; large ones mean the agent pastes documents into "
                "arguments, which costs output tokens and time."
            ),
            kind="timeseries",
            unit="short",
            targets=_token_percentiles(REQUEST),
        ),
        Panel(
            title="Calls per second",
            description=(
                "tools/call responses per second for this tool, per side. Read the token panels "
                "against it: a high p95 on a rarely called tool costs less than a medium one "
                "called constantly."
            ),
            kind="timeseries",
            unit="reqps",
            targets=(
                Target(
                    sum_by(
                        (names.SIDE,),
                        rate(series(f"{names.PAYLOAD}_count", [*_CALLS, RESPONSE]), RATE_INTERVAL),
                    ),
                    legend="{{mcp_tokens_side}}",
                ),
            ),
            minimum=0,
        ),
    )


def _quality(settings: GeneratorSettings) -> tuple[Panel, ...]:
    return (
        Panel(
            title="Responses by risk tier",
            description=(
                "This tool's responses per second by risk tier. Any red (critical) band is a "
                "response that can push the agent's instructions out of its context; orange "
                "(high) is the trend towards it."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by((names.RISK,), rate(series(names.RESPONSES_TOTAL, _CALLS), RATE_INTERVAL)),
                    legend="{{mcp_tokens_risk}}",
                ),
            ),
            stacked=True,
            colors=RISK_COLORS,
        ),
        Panel(
            title="Overhead by kind",
            description=(
                "Response tokens per second that carry no data: formatting (pretty-printed JSON), "
                "duplicate (structuredContent repeated as text), marked (operator-defined). Return "
                "compact JSON and send structured results once."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.OVERHEAD_KIND,),
                        rate(series(names.OVERHEAD_TOTAL, [*_CALLS, RESPONSE]), RATE_INTERVAL),
                    ),
                    legend="{{mcp_tokens_overhead_kind}}",
                ),
            ),
            stacked=True,
        ),
        Panel(
            title="Padding by reason",
            description=(
                "Padding findings per interval in this tool's payloads, by reason. Any finding "
                "means content built to fill the context: trace it to its source and sanitise or "
                "truncate (runbook: McpPaddingDetected). This metric has no server label."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.PADDING_REASON,),
                        increase(
                            series(names.PADDING_DETECTIONS_TOTAL, [JOB, SIDE, TOOLS_CALL, TOOL]),
                            RATE_INTERVAL,
                        ),
                    ),
                    legend="{{mcp_tokens_padding_reason}}",
                ),
            ),
        ),
        Panel(
            title="Definition tokens",
            description=(
                "Tokens of this tool's definition (name, description, input schema) in the "
                "server's latest tools/list: paid by every agent in every conversation, called or "
                "not. Shorten the description and flatten the schema if it is large."
            ),
            kind="stat",
            unit="short",
            targets=(
                Target(
                    f"max by ({names.SIDE}) ({series(names.TOOL_DEFINITION, [JOB, SIDE, SERVER, TOOL])})",
                    legend="{{mcp_tokens_side}}",
                ),
            ),
            steps=(Step(None, "green"), Step(settings.risk.low, "orange")),
        ),
    )
