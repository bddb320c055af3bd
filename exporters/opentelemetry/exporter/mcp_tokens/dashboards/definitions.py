# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The one list of alerts; every output form is rendered from it.

An alert is a value query, a comparison and a threshold. Prometheus gets
``query > threshold``; Grafana-managed alerting gets the query as its data query A and
the threshold as expression B; the runbook gets the prose (meaning, how to confirm it,
what to change). So the three can never disagree about what pages. The queries live in
`queries`, the recording rules in `recording_rules`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from . import names
from .economics import ECONOMICS_UID, HOST_CAP_PANEL, over_host_cap
from .hostlimits import HOST_LIMIT_PANEL, TOOL_LIMIT_PANEL, over_host_limit, servers_over_tool_limits
from .promql import eq, events, number, rate, series, sum_by
from .queries import (
    EXPECTED_SKIP_REASONS,
    UNEXPECTED_SKIPS,
    anchored_up,
    definition_tax,
    overhead_ratio,
    tool_cut_share,
    tool_responses,
)
from .settings import GeneratorSettings

Severity = Literal["critical", "warning", "info"]

_COMPARISONS = {">": "gt", "<": "lt"}


@dataclass(frozen=True)
class AlertDefinition:
    """One alert in every form: the rule, its Grafana twin and its runbook section."""

    name: str
    severity: Severity
    query: str
    comparison: Literal[">", "<"]
    threshold: float
    for_: str
    summary: str
    description: str
    meaning: str
    confirm: str
    actions: tuple[str, ...]
    dashboard_uid: str
    panel_title: str

    @property
    def expr(self) -> str:
        query = self.query
        # Comparisons bind tighter than `or`/`and`/`unless`: keep the query whole.
        if re.search(r"\b(or|and|unless)\b", query) and not query.startswith("("):
            query = f"({query})"
        return f"{query}\n{self.comparison} {number(self.threshold)}"

    @property
    def anchor(self) -> str:
        """The runbook heading's anchor (GitHub and most renderers lowercase it)."""
        return self.name.lower()

    @property
    def grafana_evaluator(self) -> str:
        return _COMPARISONS[self.comparison]


def _percent(fraction: float) -> str:
    return f"{number(round(fraction * 100, 6))}%"


_VALUE_TOKENS = '{{ $value | printf "%.0f" }}'
_WHERE_TOOL = (
    "tool {{ $labels.gen_ai_tool_name }} on MCP server {{ $labels.mcp_tokens_server_name }} "
    "({{ $labels.mcp_tokens_side }} side, job {{ $labels.job }})"
)
_SHRINK_ACTIONS = (
    "Paginate: return the first page with a cursor or an agentLimit-style `limit` argument, "
    "and let the agent ask for more.",
    "Truncate with a notice: cut the result at a token budget and say so in the text "
    "(`[truncated: 12,345 more rows, call again with offset=...]`), so the model knows it saw a part.",
    "Return compact JSON (no indentation, no null fields) instead of pretty-printed JSON.",
    "Split the tool: a summary tool plus a detail tool that fetches one item.",
    "Stop duplicating: when a result carries structuredContent, do not also serialise the same "
    "object as text content.",
)


def alerts(settings: GeneratorSettings) -> tuple[AlertDefinition, ...]:
    """Every alert, with thresholds from `settings`."""
    risk = settings.risk
    budget = settings.budget
    t = settings.timing
    window = settings.context_window
    return (
        AlertDefinition(
            name="McpToolResponsesCritical",
            severity="critical",
            query=tool_responses(t.window),
            comparison=">",
            threshold=risk.high,
            for_=t.for_("10m"),
            summary="An MCP tool returns responses in the critical risk tier.",
            description=(
                f"The p95 response of {_WHERE_TOOL} is {_VALUE_TOKENS} tokens over the last "
                f"{t.window}, above the critical threshold of {risk.high} tokens: more than one "
                "response in twenty can push the system prompt and earlier conversation out of "
                "the model's context."
            ),
            meaning=(
                f"More than 5% of this tool's responses are larger than {risk.high} tokens, the "
                f"instrumentation's critical risk tier, and have been for {t.for_('10m')}. Every such "
                "response lands whole in the agent's context window; a few of them crowd out the "
                "instructions the agent was given."
            ),
            confirm=(
                "Open *MCP tokens / Tool drill-down* for the tool (the alert's job, server and "
                "tool labels) and look at *Response tokens (p50, p95, p99)*: p95 above the red "
                "dashed line. *Responses by risk tier* shows how many are critical, and *Tool "
                "call duration (p50, p95)* whether the large responses are also slow."
            ),
            actions=_SHRINK_ACTIONS,
            dashboard_uid="mcp-tokens-tool",
            panel_title="Response tokens (p50, p95, p99)",
        ),
        AlertDefinition(
            name="McpToolResponsesHigh",
            severity="warning",
            query=tool_responses(t.window),
            comparison=">",
            threshold=risk.medium,
            for_=t.for_("30m"),
            summary="An MCP tool's responses are trending into the high risk tier.",
            description=(
                f"The p95 response of {_WHERE_TOOL} is {_VALUE_TOKENS} tokens over the last "
                f"{t.window}, above the high-tier threshold of {risk.medium} tokens for {t.for_('30m')}."
            ),
            meaning=(
                f"More than 5% of this tool's responses exceed {risk.medium} tokens (the high risk "
                f"tier). Not yet critical (above {risk.high}), but each such response takes a "
                "noticeable bite of the context window, and tools grow with their data."
            ),
            confirm=(
                "In *MCP tokens / Tool drill-down*, *Response tokens (p50, p95, p99)* shows p95 "
                "between the orange and red dashed lines; compare with last week to see the trend."
            ),
            actions=_SHRINK_ACTIONS[:4],
            dashboard_uid="mcp-tokens-tool",
            panel_title="Response tokens (p50, p95, p99)",
        ),
        AlertDefinition(
            name="McpToolFrequentlyCut",
            severity="warning",
            query=tool_cut_share(t.window),
            comparison=">",
            threshold=settings.guard_cut_share,
            for_=t.for_("30m"),
            summary="The guard cuts or refuses a large share of an MCP tool's results.",
            description=(
                "{{ $value | humanizePercentage }} of the calls of "
                f"{_WHERE_TOOL} were cut or refused by the mcp-tokens guard over the last "
                f"{t.window}, for {t.for_('30m')}; the threshold is "
                f"{_percent(settings.guard_cut_share)}."
            ),
            meaning=(
                "The guard (OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD) holds every result to its token "
                "limit: this tool's results go over it so often that the model regularly sees a "
                "part of the answer and a notice, or an error result asking for less. Each cut costs "
                "the agent a turn to ask again; the tool returns more than one call should."
            ),
            confirm=(
                "*MCP tokens / Tool drill-down*, *Results cut or refused by the guard*, next to "
                "*Response tokens (p50, p95, p99)* (which counts what was delivered); *MCP tokens / "
                "Overview*, *Guard actions by tool* for the other tools of the server."
            ),
            actions=(
                "Paginate the tool: a cursor or offset/limit argument, with a default page that "
                "fits the limit, so the model asks for the next page instead of being cut.",
                *_SHRINK_ACTIONS[2:4],
                "If the limit is too low for this tool's normal answers, give it its own with "
                "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_TOOL_LIMITS (name=tokens), staying under the "
                "host's cap (Claude Code: MAX_MCP_OUTPUT_TOKENS, 25,000 by default).",
            ),
            dashboard_uid="mcp-tokens-tool",
            panel_title="Results cut or refused by the guard",
        ),
        AlertDefinition(
            name="McpToolOverheadHigh",
            severity="warning",
            query=overhead_ratio(t.overhead_window),
            comparison=">",
            threshold=settings.overhead_share,
            for_=t.for_("1h"),
            summary="An MCP tool spends a large share of its response tokens on overhead.",
            description=(
                "{{ $value | humanizePercentage }} of the response tokens of "
                "{{ $labels.mcp_method_name }} {{ $labels.gen_ai_tool_name }} on MCP server "
                "{{ $labels.mcp_tokens_server_name }} ({{ $labels.mcp_tokens_side }} side, job "
                f"{{{{ $labels.job }}}}) carry no data (indentation, duplicated content, keys repeated "
                "in every record), over the last "
                f"{t.overhead_window}; the threshold is {_percent(settings.overhead_share)}."
            ),
            meaning=(
                "Overhead tokens are tokens the model reads without learning anything: JSON "
                "indentation and spacing, the same object sent twice (as structuredContent and "
                "again as text), and the same keys spelled out in every record of an array. They "
                "cost context and money exactly like data."
            ),
            confirm=(
                "*MCP tokens / Tool drill-down*, *Overhead by kind*: `formatting` means "
                "pretty-printed JSON, `duplicate` means structuredContent repeated as text, "
                "`structure` means arrays of records that repeat their keys (a table of a header "
                "and rows would not), `marked` means content the operator marked as overhead."
            ),
            actions=(
                _SHRINK_ACTIONS[2],
                _SHRINK_ACTIONS[4],
                "Return lists of records as a table: the column names once, then one array of values "
                "per record (or CSV), instead of an object per record.",
            ),
            dashboard_uid="mcp-tokens-tool",
            panel_title="Overhead by kind",
        ),
        AlertDefinition(
            name="McpPaddingDetected",
            severity="warning",
            query=events(
                names.PADDING_DETECTIONS_TOTAL,
                (),
                (names.JOB, names.SIDE, names.METHOD, names.TOOL, names.PADDING_REASON),
                t.event_window,
            ),
            comparison=">",
            threshold=0,
            for_=t.for_("1m"),
            summary="An MCP payload contains adversarial padding.",
            description=(
                f"{_VALUE_TOKENS} padding finding(s) of kind {{{{ $labels.mcp_tokens_padding_reason }}}} "
                "in {{ $labels.mcp_method_name }} payloads of tool {{ $labels.gen_ai_tool_name }} "
                "({{ $labels.mcp_tokens_side }} side, job {{ $labels.job }}) "
                f"in the last {t.event_window}."
            ),
            meaning=(
                "A payload contains content built to fill a model's context rather than to inform "
                "it: invisible characters, long repetitions, text with almost no distinct tokens, "
                "unusual token density or extremely long lines. Whoever controls that content (a "
                "web page, a document, a peer server) can push the agent's instructions out of "
                "its window."
            ),
            confirm=(
                "*MCP tokens / Overview*, *Padding detections* by reason and tool; the spans of the "
                "affected calls carry an `mcp_tokens.padding` event with the offset and score."
            ),
            actions=(
                "Find the source: which document, URL or upstream service fed the tool "
                "(the span's attributes and, if capture is on, its content).",
                "Sanitise at the tool: strip invisible characters, collapse repetitions, cap line length.",
                "If the source is untrusted, truncate its content with a notice or stop passing it through.",
            ),
            dashboard_uid="mcp-tokens-overview",
            panel_title="Padding detections",
        ),
        AlertDefinition(
            name="McpBudgetCriticalCrossings",
            severity="warning",
            query=events(
                names.BUDGET_CROSSINGS_TOTAL,
                (eq(names.BUDGET_LEVEL, "critical"),),
                (names.JOB, names.SIDE),
                t.event_window,
            ),
            comparison=">",
            threshold=0,
            for_=t.for_("1m"),
            summary="MCP traffic has filled a context window to the critical level.",
            description=(
                f"{_VALUE_TOKENS} budget scope(s) on the {{{{ $labels.mcp_tokens_side }}}} side of job "
                f"{{{{ $labels.job }}}} reached {_percent(budget.critical)} of their context window in the "
                f"last {t.event_window}."
            ),
            meaning=(
                f"A budget scope (a conversation, or a client session by default) has put MCP "
                f"payloads worth {_percent(budget.critical)} of its context window into it. From "
                "here the agent (or its framework) must drop or summarise earlier turns, and the "
                "system prompt is at risk."
            ),
            confirm=(
                "*MCP tokens / Context budget*: *Scopes crossing warning and critical* shows the "
                "crossings, *Budget utilisation heatmap* the distribution; the spans carry "
                "`mcp_tokens.budget.scope` to find the conversation."
            ),
            actions=(
                "Shrink the biggest contributors first: *Top tools by p95 response tokens* on the overview.",
                "Remove unused servers or tools from the agent: their definitions are paid in every scope.",
                *_SHRINK_ACTIONS[:2],
            ),
            dashboard_uid="mcp-tokens-budget",
            panel_title="Scopes crossing warning and critical",
        ),
        AlertDefinition(
            name="McpBudgetWarningCrossings",
            severity="info",
            query=events(
                names.BUDGET_CROSSINGS_TOTAL,
                (eq(names.BUDGET_LEVEL, "warning"),),
                (names.JOB, names.SIDE),
                t.event_window,
            ),
            comparison=">",
            threshold=0,
            for_=t.for_("1m"),
            summary="MCP traffic has filled a context window to the warning level.",
            description=(
                f"{_VALUE_TOKENS} budget scope(s) on the {{{{ $labels.mcp_tokens_side }}}} side of job "
                f"{{{{ $labels.job }}}} reached {_percent(budget.warning)} of their context window in the "
                f"last {t.event_window}."
            ),
            meaning=(
                f"A budget scope passed {_percent(budget.warning)} of its context window. Nothing is "
                "lost yet; this is the early signal for the critical crossing."
            ),
            confirm="*MCP tokens / Context budget*, *Scopes crossing warning and critical*.",
            actions=(
                "Watch whether the same scopes go on to the critical level; "
                "act as for McpBudgetCriticalCrossings.",
            ),
            dashboard_uid="mcp-tokens-budget",
            panel_title="Scopes crossing warning and critical",
        ),
        AlertDefinition(
            name="McpToolDefinitionTaxHigh",
            severity="warning",
            query=definition_tax(t.window),
            comparison=">",
            threshold=settings.definition_budget_tokens,
            for_=t.for_("15m"),
            summary="An MCP server's tool definitions alone take a large share of the context window.",
            description=(
                "The tool definitions of MCP server {{ $labels.mcp_tokens_server_name }} "
                "({{ $labels.mcp_tokens_side }} side, job {{ $labels.job }}) take "
                f"{_VALUE_TOKENS} tokens, more than {_percent(settings.definition_share)} of a "
                f"{window}-token context window ({settings.definition_budget_tokens} tokens), before "
                "any tool is called."
            ),
            meaning=(
                "Every agent connected to this server pays for its tools/list in every conversation, "
                "whether it calls the tools or not: names, descriptions and input schemas of every "
                "tool sit in the context window from the first turn."
            ),
            confirm=(
                "*MCP tokens / Context budget*, *Tool definition tax versus the context window*; "
                "*MCP tokens / Overview*, *Tool definition tax per server* for the largest servers."
            ),
            actions=(
                "Shorten descriptions to one or two sentences; move examples and explanations to a resource.",
                "Flatten input schemas: drop unused optional parameters, long enums and nested objects.",
                "Split the server by audience, or expose fewer tools per agent (client-side tool filtering).",
                "Remove tools that no agent calls (`mcp_tokens_payload_count` by tool shows which).",
            ),
            dashboard_uid="mcp-tokens-budget",
            panel_title="Tool definition tax versus the context window",
        ),
        AlertDefinition(
            name="McpToolResponsesOverHostCap",
            severity="warning",
            query=over_host_cap(settings.host_cap, t.event_window),
            comparison=">",
            threshold=0,
            for_=t.for_("1m"),
            summary="An MCP tool returns results larger than hosts accept.",
            description=(
                f"{_VALUE_TOKENS} response(s) of {_WHERE_TOOL} were over {settings.host_cap} tokens in "
                f"the last {t.event_window}: hosts with a {settings.host_cap}-token result cap refuse them."
            ),
            meaning=(
                f"Hosts cap the size of a tool result they pass to the model: Claude Code refuses a "
                f"result over MAX_MCP_OUTPUT_TOKENS (25,000 tokens by default) and the agent sees an "
                f"error instead of the data. This tool returned results over {settings.host_cap} tokens "
                "(the generator's `--host-cap`): on such hosts those calls failed, however good the data."
            ),
            confirm=(
                f"*MCP tokens / Tool economics*, *{HOST_CAP_PANEL}* lists the tools and how many "
                "responses; *MCP tokens / Tool drill-down*, *Response tokens (p50, p95, p99)* shows "
                "their size over time. The payload histogram has a bucket at 25,000 tokens, so the "
                "count is exact for that cap."
            ),
            actions=(
                "Paginate: return a page with a cursor (or a `limit`/`offset` argument) and let the "
                "agent ask for more.",
                "Cap results in the server with the guard: run it with "
                "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD=truncate (cut a result at the per-result token "
                "limit, with a notice) or =reject (return an error the agent can act on).",
                *_SHRINK_ACTIONS[1:4],
            ),
            dashboard_uid=ECONOMICS_UID,
            panel_title=HOST_CAP_PANEL,
        ),
        AlertDefinition(
            name="McpToolResponsesOverHostLimit",
            severity="warning",
            query=over_host_limit(t.event_window),
            comparison=">",
            threshold=0,
            for_=t.for_("1m"),
            summary="An MCP tool returns results over a host's limit, in that host's own unit.",
            description=(
                f"{_VALUE_TOKENS} response(s) of {_WHERE_TOOL} were over {{{{ $labels.mcp_tokens_host }}}}'s "
                f"{{{{ $labels.mcp_tokens_host_limit }}}} limit in the last {t.event_window}."
            ),
            meaning=(
                "Hosts cap the results they show a model, each in its own unit: Claude Code counts "
                "Claude tokens (25,000 by default) and moves results over 50,000 characters to a file, "
                "Codex CLI cuts at 10 KiB or 256 lines, Copilot CLI at 10 KB. The instrumentation "
                "measured this tool's results the way the named host does (the hosts it was given in "
                "OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS) and found them over: on that host the model saw "
                "a cut, an error or a file path instead of the whole result."
            ),
            confirm=(
                f"*MCP tokens / Tool economics*, *{HOST_LIMIT_PANEL}* lists the tools per host and limit; "
                "`mcp-tokens profile --host <host> --call <tool>` measures one call the same way."
            ),
            actions=(
                "Paginate, or cap results in the server: the guard with "
                "OTEL_INSTRUMENTATION_MCP_TOKENS_ENCODING=claude-4.7 holds a limit in Claude tokens.",
                *_SHRINK_ACTIONS[1:4],
            ),
            dashboard_uid=ECONOMICS_UID,
            panel_title=HOST_LIMIT_PANEL,
        ),
        AlertDefinition(
            name="McpServerToolsOverHostLimit",
            severity="warning",
            query=servers_over_tool_limits(settings),
            comparison=">",
            threshold=0,
            for_=t.for_("5m"),
            summary="An MCP server lists more tools than a host takes.",
            description=(
                "MCP server {{ $labels.mcp_tokens_server_name }} ({{ $labels.mcp_tokens_side }} side, job "
                f"{{{{ $labels.job }}}}) lists {_VALUE_TOKENS} tools; "
                "{{ $labels.mcp_tokens_host }} takes at most "
                "{{ $labels.mcp_tokens_host_tool_limit }} per request."
            ),
            meaning=(
                "Hosts cap the tools a request may carry, across every server an agent connects: VS Code "
                "refuses more than 128, Cursor warns and errors past 80, Windsurf takes 50, the Gemini API "
                "512 function declarations. This server alone lists more than the named host takes: on "
                "that host some of its tools (or the request) are dropped."
            ),
            confirm=(
                f"*MCP tokens / Tool economics*, *{TOOL_LIMIT_PANEL}*; `mcp-tokens profile --host <host>` "
                "names the tools past the limit."
            ),
            actions=(
                "Expose fewer tools: group related operations into one tool with an `action` argument.",
                "Split the server by audience, or let clients filter tools (tool search, deferred loading).",
                "Remove tools that no agent calls (*Tools listed but never called* on the same dashboard).",
            ),
            dashboard_uid=ECONOMICS_UID,
            panel_title=TOOL_LIMIT_PANEL,
        ),
        AlertDefinition(
            name="McpTokensAnalysisSkipped",
            severity="warning",
            query=sum_by(
                (names.JOB, names.SIDE, names.SKIP_REASON),
                rate(series(names.ANALYSIS_SKIPPED_TOTAL, (UNEXPECTED_SKIPS,)), t.window),
            ),
            comparison=">",
            threshold=0,
            for_=t.for_("15m"),
            summary="The instrumentation estimates payloads from their length instead of counting them.",
            description=(
                "The instrumentation in job {{ $labels.job }} ({{ $labels.mcp_tokens_side }} side) "
                f'has estimated {{{{ $value | printf "%.2f" }}}} payloads per second from their length for '
                f"{t.for_('15m')}, reason {{{{ $labels.mcp_tokens_skip_reason }}}}; its token metrics are "
                "approximate."
            ),
            meaning=(
                "Tokens are counted by the user's counting service, at the lowest CPU priority, so that "
                "counting never slows the host. When a process holds all it may for the counter "
                "(`overload`: the machine has had no idle CPU for it), when the analysis fails or the "
                "service went away (`analysis_error`), or when the instrumentation stopped first "
                "(`shutdown`), payloads are still recorded, estimated from their length at the tokens "
                "per character that tool's exact counts showed, and counted here by reason. Counts of "
                "responses stay exact; token sums become approximate. Payloads estimated by design "
                f"({', '.join(EXPECTED_SKIP_REASONS)}: over the size limit, no exact tokenizer "
                "configured, or counting behind with the content-aware estimate) do not alert and show "
                "on the dashboard."
            ),
            confirm=(
                "*MCP tokens / Overview*, *Payloads estimated or skipped* by reason, next to "
                "*Analysis time (p50, p99)* for the counter's cost per exchange."
            ),
            actions=(
                "`overload`: the machine is saturated, or the counter needs more processes: give it "
                "idle CPU, raise OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_PROCESSES on a machine with more "
                "cores, or OTEL_INSTRUMENTATION_MCP_TOKENS_QUEUE_SIZE to ride out bursts.",
                "Huge payloads: lower OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_BYTES so they are estimated "
                "(cheap) instead of counted; they are a finding of their own (McpToolResponsesCritical).",
                "`analysis_error`: the counting service's log (`mcp-tokens/*.log` in the user's runtime "
                "directory) and the application's name the cause; a service that was killed is replaced "
                "by the next call. Report a failed analysis with the tool's payload shape.",
            ),
            dashboard_uid="mcp-tokens-overview",
            panel_title="Payloads estimated or skipped",
        ),
        AlertDefinition(
            name="McpTokensTargetDown",
            severity="warning",
            query=anchored_up(t.target_memory),
            comparison="<",
            threshold=1,
            for_=t.for_("10m"),
            summary="Prometheus cannot scrape a process that exported MCP token metrics.",
            description=(
                "Target {{ $labels.instance }} of job {{ $labels.job }} exported mcp-tokens metrics "
                f"in the last {t.target_memory} but its scrapes have failed for {t.for_('10m')}: its "
                "dashboards are empty and its token alerts cannot fire."
            ),
            meaning=(
                "The target is still in service discovery, so Prometheus tries to scrape it, but "
                "every scrape fails. While it does, nothing about its MCP traffic is known, "
                "including critical responses. A target removed from service discovery on purpose "
                "does not alert."
            ),
            confirm=(
                'Prometheus\' targets page (`/targets`) shows the error; `up{job="<job>"}` is 0. '
                "The dashboards show a gap for that job."
            ),
            actions=(
                "Check that the process runs and its metrics port answers (`curl http://<instance>/metrics`).",
                "Check that it was started under `opentelemetry-instrument --metrics_exporter prometheus` "
                "(or with a PrometheusMetricReader) and binds the address Prometheus scrapes.",
                "A scrape timeout on a huge exposition points at label cardinality: see the `_OTHER` folding "
                "settings (OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_LABEL_VALUES).",
            ),
            dashboard_uid="mcp-tokens-overview",
            panel_title="Tokens per second by server and tool",
        ),
    )
