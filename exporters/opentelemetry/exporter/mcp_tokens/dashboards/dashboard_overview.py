# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""MCP tokens / Overview: where the tokens go, which tools are risky, what it costs."""

from __future__ import annotations

from . import names
from .dashboard_common import (
    JOB,
    LINK_TAG,
    OVERVIEW_UID,
    RESPONSE,
    RISK_COLORS,
    SERVER,
    SIDE,
    TAGS,
    TOOLS_CALL,
    budget_steps,
    common_variables,
    definition_tax,
    risk_steps,
    tool_drilldown_url,
)
from .dashboard_guard import guardrails_overview
from .model import Dashboard, DataLink, Panel, Row, Step, Target
from .promql import RANGE, RATE_INTERVAL, eq, increase, quantile, rate, series, sum_by
from .settings import GeneratorSettings

_TRAFFIC = [JOB, SIDE, SERVER]
_TOOL_KEEP = (names.SIDE, names.SERVER, names.TOOL)


def overview_dashboard(settings: GeneratorSettings) -> Dashboard:
    return Dashboard(
        uid=OVERVIEW_UID,
        title="MCP tokens / Overview",
        description=(
            "Token economics of MCP traffic measured by opentelemetry-instrumentation-mcp-tokens: "
            "volume, risk tiers, overhead, padding, context budgets and the instrumentation's own cost."
        ),
        tags=TAGS,
        variables=common_variables(),
        rows=(
            Row("At a glance", _glance(settings)),
            Row("Traffic", _traffic(settings)),
            Row("Risks and budgets", _risks(settings)),
            Row("Guardrails", guardrails_overview()),
            Row("Instrumentation cost", _cost()),
        ),
        links_tag=LINK_TAG,
    )


def _glance(settings: GeneratorSettings) -> tuple[Panel, ...]:
    responses = series(names.RESPONSES_TOTAL, _TRAFFIC)
    critical = series(names.RESPONSES_TOTAL, [*_TRAFFIC, eq(names.RISK, "critical")])
    return (
        Panel(
            title="Tokens per second",
            description=(
                "All MCP payload tokens (requests and responses, every method) per second in the "
                "selection. A sudden rise usually comes from one tool: find it in *Tokens per second "
                "by server and tool*."
            ),
            kind="stat",
            unit="short",
            targets=(Target(f"sum({rate(series(f'{names.PAYLOAD}_sum', _TRAFFIC), RATE_INTERVAL)})"),),
            width=6,
            height=4,
        ),
        Panel(
            title="Critical responses",
            description=(
                f"Share of responses above {settings.risk.high} tokens (the critical risk tier). "
                "Anything above zero deserves a look at *Top tools by p95 response tokens*; the "
                "McpToolResponsesCritical alert fires when one tool has more than 5% of them."
            ),
            kind="stat",
            unit="percentunit",
            targets=(
                Target(
                    f"(sum({rate(critical, RATE_INTERVAL)}) or vector(0))\n"
                    f"/ sum({rate(responses, RATE_INTERVAL)})"
                ),
            ),
            width=6,
            height=4,
            steps=(Step(None, "green"), Step(0.001, "orange"), Step(0.05, "red")),
        ),
        Panel(
            title="Largest tool definition tax",
            description=(
                "The most tokens any one MCP server's tools/list costs an agent before the first "
                f"call. Red from {settings.definition_budget_tokens} tokens "
                f"({settings.definition_share:.0%} of a {settings.context_window}-token window): trim "
                "descriptions and schemas, see *Tool definition tax per server*."
            ),
            kind="stat",
            unit="short",
            targets=(Target(f"max({definition_tax(_TRAFFIC)})"),),
            width=6,
            height=4,
            steps=(Step(None, "green"), Step(settings.definition_budget_tokens, "red")),
        ),
        Panel(
            title="Padding findings in range",
            description=(
                "Adversarial padding findings (invisible characters, repetition, low diversity, "
                "token density, long lines) in the selected time range. Any finding: see "
                "*Padding detections* for the tool and reason, and the runbook for McpPaddingDetected."
            ),
            kind="stat",
            unit="short",
            targets=(
                Target(
                    f"sum({increase(series(names.PADDING_DETECTIONS_TOTAL, [JOB, SIDE]), RANGE)})",
                    instant=True,
                ),
            ),
            width=6,
            height=4,
            steps=(Step(None, "green"), Step(1, "red")),
        ),
    )


def _traffic(settings: GeneratorSettings) -> tuple[Panel, ...]:
    keep = (names.SIDE, names.SERVER, names.METHOD, names.TOOL)
    top = quantile(
        0.95,
        _TOOL_KEEP,
        series(f"{names.PAYLOAD}_bucket", [*_TRAFFIC, RESPONSE, TOOLS_CALL]),
        RANGE,
        over="increase",
    )
    overhead_keep = (names.SIDE, names.SERVER, names.TOOL)
    return (
        Panel(
            title="Tokens per second by server and tool",
            description=(
                "Payload tokens per second, stacked by server, method and tool (tools/list, "
                "resources/read and prompts/get appear without a tool). The tallest band is where "
                "the context window goes; if it is one tool, open it in the Tool drill-down."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(keep, rate(series(f"{names.PAYLOAD}_sum", _TRAFFIC), RATE_INTERVAL)),
                    legend=(
                        "{{mcp_tokens_server_name}} {{mcp_method_name}} {{gen_ai_tool_name}} "
                        "({{mcp_tokens_side}})"
                    ),
                ),
            ),
            stacked=True,
        ),
        Panel(
            title="Responses by risk tier",
            description=(
                f"Responses per second by risk tier: low up to {settings.risk.low} tokens, medium up "
                f"to {settings.risk.medium}, high up to {settings.risk.high}, critical above. Growing "
                "orange or red bands mean responses that displace the agent's context: paginate or "
                "truncate the tools behind them."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by((names.RISK,), rate(series(names.RESPONSES_TOTAL, _TRAFFIC), RATE_INTERVAL)),
                    legend="{{mcp_tokens_risk}}",
                ),
            ),
            stacked=True,
            colors=RISK_COLORS,
        ),
        Panel(
            title="Top tools by p95 response tokens",
            description=(
                "The ten tools with the largest 95th-percentile response over the selected range, "
                "coloured by risk tier. A red bar is a tool that pages (McpToolResponsesCritical); "
                "click it to open the Tool drill-down."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"topk(10, {top})",
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            steps=risk_steps(settings),
            links=(DataLink("Open the tool drill-down", tool_drilldown_url()),),
        ),
        Panel(
            title="Overhead ratio by tool",
            description=(
                "Share of response tokens that carry no data: JSON indentation, structuredContent "
                f"repeated as text, marked boilerplate. Above {settings.overhead_share:.0%} "
                "(dashed line) return compact JSON and stop duplicating structuredContent."
            ),
            kind="timeseries",
            unit="percentunit",
            targets=(
                Target(
                    sum_by(
                        overhead_keep,
                        rate(series(names.OVERHEAD_TOTAL, [*_TRAFFIC, RESPONSE]), RATE_INTERVAL),
                    )
                    + "\n/\n"
                    + sum_by(
                        overhead_keep,
                        rate(series(f"{names.PAYLOAD}_sum", [*_TRAFFIC, RESPONSE]), RATE_INTERVAL),
                    ),
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                ),
            ),
            steps=(Step(None, "green"), Step(settings.overhead_share, "red")),
            threshold_lines=True,
            minimum=0,
        ),
    )


def _risks(settings: GeneratorSettings) -> tuple[Panel, ...]:
    utilization = series(f"{names.BUDGET_UTILIZATION}_bucket", _TRAFFIC)
    return (
        Panel(
            title="Padding detections",
            description=(
                "Padding findings per interval by tool and reason. Content built to fill a context "
                "window is an attack on the agent: find the document or upstream that fed the tool "
                "and sanitise or truncate it (runbook: McpPaddingDetected)."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.SIDE, names.TOOL, names.PADDING_REASON),
                        increase(series(names.PADDING_DETECTIONS_TOTAL, [JOB, SIDE]), RATE_INTERVAL),
                    ),
                    legend="{{gen_ai_tool_name}} {{mcp_tokens_padding_reason}} ({{mcp_tokens_side}})",
                ),
            ),
            width=8,
        ),
        Panel(
            title="Budget utilisation (p50, p90, p99)",
            description=(
                "How full budget scopes' context windows are after each exchange, as percentiles "
                f"over all scopes. Dashed lines: warning {settings.budget.warning:.0%}, critical "
                f"{settings.budget.critical:.0%}. A p90 near critical means most conversations run "
                "out of room: shrink the largest tools or definitions (Context budget dashboard)."
            ),
            kind="timeseries",
            unit="percentunit",
            targets=tuple(
                Target(quantile(q, (), utilization, RATE_INTERVAL), legend=f"p{round(q * 100)}")
                for q in (0.5, 0.9, 0.99)
            ),
            width=8,
            steps=budget_steps(settings),
            threshold_lines=True,
            minimum=0,
        ),
        Panel(
            title="Tool definition tax per server",
            description=(
                "Tokens of each server's tools/list (names, descriptions, input schemas) that every "
                "connected agent carries in its context from the first turn. Red from "
                f"{settings.definition_budget_tokens} tokens: shorten descriptions, flatten schemas, "
                "split the server."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    definition_tax(_TRAFFIC),
                    legend="{{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=8,
            steps=(Step(None, "green"), Step(settings.definition_budget_tokens, "red")),
        ),
    )


def _cost() -> tuple[Panel, ...]:
    analysis = [JOB, SIDE]
    return (
        Panel(
            title="Analysis time (p50, p99)",
            description=(
                "CPU time the instrumentation spends counting one exchange, in its background "
                "worker (never on the response path). A p99 in the hundreds of milliseconds means "
                "very large payloads; expect skips under load."
            ),
            kind="timeseries",
            unit="s",
            targets=tuple(
                Target(
                    quantile(
                        q,
                        (names.SIDE,),
                        series(f"{names.ANALYSIS_DURATION}_bucket", analysis),
                        RATE_INTERVAL,
                    ),
                    legend=f"p{round(q * 100)} ({{{{mcp_tokens_side}}}})",
                )
                for q in (0.5, 0.99)
            ),
            width=8,
        ),
        Panel(
            title="Analysis CPU",
            description=(
                "Share of one CPU core spent on token analysis, per job and side. If it competes "
                "with the server's own work, lower OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_BYTES so "
                "huge payloads are estimated instead of counted."
            ),
            kind="timeseries",
            unit="percentunit",
            targets=(
                Target(
                    sum_by(
                        (names.JOB, names.SIDE),
                        rate(series(f"{names.ANALYSIS_DURATION}_sum", analysis), RATE_INTERVAL),
                    ),
                    legend="{{job}} ({{mcp_tokens_side}})",
                ),
            ),
            width=8,
            minimum=0,
        ),
        Panel(
            title="Payloads estimated or skipped",
            description=(
                "Payloads per second the instrumentation estimated instead of counting exactly, by "
                "reason. Sustained `overload` means the counter has no idle CPU and token sums are "
                "approximate: see the runbook for McpTokensAnalysisSkipped."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.JOB, names.SIDE, names.SKIP_REASON),
                        rate(series(names.ANALYSIS_SKIPPED_TOTAL, analysis), RATE_INTERVAL),
                    ),
                    legend="{{job}} {{mcp_tokens_skip_reason}} ({{mcp_tokens_side}})",
                ),
            ),
            width=8,
            minimum=0,
        ),
    )
