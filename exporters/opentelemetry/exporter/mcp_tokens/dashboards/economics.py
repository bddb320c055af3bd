# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Tool economics: the unused-tool tax, cost in money and host result caps.

One module for the queries, the recording rules, the alert and the dashboard
(*MCP tokens / Tool economics*), so the three agree on what "never called" and "over the
cap" mean:

- **Listed**: a tool whose `mcp_tokens_tool_definition` is above 0 (0 marks a tool that left
  the listing). Several processes may export the same server: `max by` per tool first, so a
  gauge is never multiplied by its replicas.
- **Called in a window**: at least one `tools/call` response (`mcp_tokens_payload_count`) in
  it. A counter series appears at its first increment, so `increase()` alone misses a tool
  called once by a process that started inside the window: a series that did not exist a
  window ago counts with its whole value (`promql.events`).
- **Never called**: listed and not called; its definition tokens are paid in every
  conversation for nothing.
- **Cost**: MCP traffic reaches the model as input tokens (tool results, and every
  conversation's tool definitions), priced by the `price_per_mtok` dashboard variable.
- **Over the host cap**: responses above `host_cap` tokens, counted from the payload
  histogram's buckets: exact when the cap is a bucket bound (25,000 is one), else counted
  above the largest bound below the cap (more responses than the cap would refuse).
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.instrumentation.mcp_tokens import semconv

from . import names
from .dashboard_common import JOB, LINK_TAG, RESPONSE, SERVER, SIDE, TAGS, TOOLS_CALL, common_variables
from .dashboard_common import definition_tax as per_server_definition_tax
from .hostlimits import host_limit_panels
from .model import Dashboard, Panel, Row, Step, Target, Variable
from .promql import RANGE, RATE_INTERVAL, eq, events, increase, matches, rate, series, sum_by
from .settings import GeneratorSettings

ECONOMICS_UID = "mcp-tokens-economics"
PRICE_VARIABLE = "price_per_mtok"
CURRENCY_VARIABLE = "currency"
DEFAULT_PRICE_PER_MTOK = "3"
"""USD per million input tokens: Anthropic's list price for Claude Sonnet 4 input (prompts up to
200k tokens). Set the dashboard variable to your model's input price."""
DEFAULT_CURRENCY = "USD"
UNUSED_WINDOW = "1d"
"""The recording rules' window for "called": a tool not called for a day is unused."""
HOST_CAP_PANEL = "Responses over the host cap"

SERVER_LABELS = (names.JOB, names.SIDE, names.SERVER)
TOOL_LABELS = (*SERVER_LABELS, names.TOOL)
_RESPONSE_METHODS = matches(names.METHOD, "tools/call|resources/read|prompts/get")
_PRICE = f"${PRICE_VARIABLE} / 1000000"


def _on(labels: Sequence[str]) -> str:
    return ", ".join(labels)


# --- queries --------------------------------------------------------------------------------
def listed_tools(matchers: Sequence[str] = ()) -> str:
    """Definition tokens per listed tool (replicas of a server count once)."""
    return f"max by ({_on(TOOL_LABELS)}) ({series(names.TOOL_DEFINITION, matchers)}) > 0"


def tool_calls(window: str, matchers: Sequence[str] = ()) -> str:
    """tools/call responses per tool in `window`, new series counted whole."""
    selector = (eq(names.DIRECTION, names.RESPONSE), eq(names.METHOD, names.TOOLS_CALL), *matchers)
    return events(f"{names.PAYLOAD}_count", selector, TOOL_LABELS, window)


def never_called(listed: str, calls: str) -> str:
    """Definition tokens of the listed tools with no call."""
    return f"({listed})\nunless on ({_on(TOOL_LABELS)})\n({calls} > 0)"


def called(listed: str, calls: str) -> str:
    return f"({listed})\nand on ({_on(TOOL_LABELS)})\n({calls} > 0)"


def count_per_server(tools: str) -> str:
    return f"count by ({_on(SERVER_LABELS)}) ({tools})"


def per_server_or_zero(aggregate: str, tools: str, listed: str, keep: Sequence[str] = SERVER_LABELS) -> str:
    """`aggregate` (sum, count) of `tools` per server, 0 for a listed server that has none
    (an aggregation over nothing is absent, which a panel shows as "no data")."""
    by = f"{aggregate} by ({_on(keep)})"
    return f"({by} ({tools})\nor 0 * {by} ({listed}))"


def share_of_listing(unused: str, listed: str) -> str:
    """Never-called tokens over listed tokens per server; 0 (not absent) when every tool was called."""
    return f"{per_server_or_zero('sum', unused, listed)}\n/ {sum_by(SERVER_LABELS, listed)}"


def cap_bucket(host_cap: int) -> int:
    """The largest bucket bound at or below the cap (the cap itself when it is a bound)."""
    bounds = [bound for bound in semconv.TOKEN_BUCKETS if bound <= host_cap]
    return int(bounds[-1]) if bounds else 0


def _le(bound: int) -> str:
    # Prometheus 3 writes the bound as 25000.0; earlier versions keep the exporter's text.
    return matches(names.LE, f"{bound}(\\\\.0)?")


def over_host_cap(host_cap: int, window: str, matchers: Sequence[str] = ()) -> str:
    """Tool responses above the cap in `window`, per tool: all responses minus those within the cap."""
    selector = (eq(names.DIRECTION, names.RESPONSE), eq(names.METHOD, names.TOOLS_CALL), *matchers)
    bucket = f"{names.PAYLOAD}_bucket"
    everything = events(bucket, (*selector, eq(names.LE, "+Inf")), TOOL_LABELS, window)
    within = events(bucket, (*selector, _le(cap_bucket(host_cap))), TOOL_LABELS, window)
    return f"{everything}\n- {within}"


# --- dashboard ------------------------------------------------------------------------------
def price_variables() -> tuple[Variable, ...]:
    return (
        Variable(
            name=PRICE_VARIABLE,
            label="Price per million input tokens",
            kind="textbox",
            query=DEFAULT_PRICE_PER_MTOK,
            description=(
                "What your model charges per million input tokens; MCP results and tool definitions "
                "reach the model as input. Default: 3 (USD), Anthropic's list price for Claude "
                "Sonnet 4 input."
            ),
            multi=False,
            include_all=False,
        ),
        Variable(
            name=CURRENCY_VARIABLE,
            label="Currency",
            kind="textbox",
            query=DEFAULT_CURRENCY,
            description="The currency of the price, shown in the cost panels' titles.",
            multi=False,
            include_all=False,
        ),
    )


_SCOPE = [JOB, SIDE, SERVER]


def economics_dashboard(settings: GeneratorSettings) -> Dashboard:
    return Dashboard(
        uid=ECONOMICS_UID,
        title="MCP tokens / Tool economics",
        description=(
            "What MCP traffic is worth: tools listed in every conversation but never called, "
            "the cost of responses and definitions at your model's input price, and responses "
            "larger than the result cap hosts enforce."
        ),
        tags=TAGS,
        variables=(*common_variables(), *price_variables()),
        rows=(
            Row("Tools listed but never called", _unused_panels()),
            Row("Cost at ${price_per_mtok} ${currency} per million input tokens", _cost_panels()),
            Row("Host result caps", _host_cap_panels(settings)),
            Row("Host limits", host_limit_panels(settings, _SCOPE)),
        ),
        links_tag=LINK_TAG,
    )


def _unused_panels() -> tuple[Panel, ...]:
    listed = listed_tools(_SCOPE)
    calls = tool_calls(RANGE, _SCOPE)
    unused = never_called(listed, calls)
    by_server = "{{mcp_tokens_server_name}} ({{mcp_tokens_side}}, {{job}})"
    return (
        Panel(
            title="Never-called share of the definition tax",
            description=(
                "Per server: the definition tokens of tools listed but not called in the selected "
                "time range, as a share of the whole listing. Every conversation pays the listing; "
                "this share buys nothing. Remove or filter those tools per agent."
            ),
            kind="bargauge",
            unit="percentunit",
            targets=(Target(share_of_listing(unused, listed), legend=by_server, instant=True),),
            width=8,
            steps=(Step(None, "green"), Step(0.25, "orange"), Step(0.5, "red")),
            minimum=0,
            maximum=1,
        ),
        Panel(
            title="Tools listed, called and never called",
            description=(
                "Per server: tools in its latest listing, tools called at least once in the time "
                "range, and tools never called. Many never-called tools: expose fewer tools per agent."
            ),
            kind="stat",
            unit="short",
            targets=(
                Target(count_per_server(listed), legend=f"listed: {by_server}", instant=True),
                Target(
                    per_server_or_zero("count", called(listed, calls), listed),
                    legend=f"called: {by_server}",
                    instant=True,
                ),
                Target(
                    per_server_or_zero("count", unused, listed),
                    legend=f"never called: {by_server}",
                    instant=True,
                ),
            ),
            width=6,
        ),
        Panel(
            title="Tools never called, by definition tokens",
            description=(
                "Each tool listed but not called in the time range, with its definition tokens: "
                "what removing it from the agent's tool list saves in every conversation."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"sort_desc({unused})",
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=10,
            height=10,
        ),
        Panel(
            title="Definition tokens per call",
            description=(
                "Each called tool's definition tokens over its calls in the time range: a tool in "
                "every listing that is called once a day costs its whole definition per call. "
                "Never-called tools are in the panel beside."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"topk(20, ({listed})\n/ on ({_on(TOOL_LABELS)})\n({calls} > 0))",
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=14,
            height=10,
        ),
    )


def _response_tokens(window: str, keep: Sequence[str], method: str = _RESPONSE_METHODS) -> str:
    selector = series(f"{names.PAYLOAD}_sum", [RESPONSE, method, *_SCOPE])
    return sum_by(keep, increase(selector, window))


def _cost_panels() -> tuple[Panel, ...]:
    per_server = (names.SIDE, names.SERVER)
    rate_selector = series(f"{names.PAYLOAD}_sum", [RESPONSE, _RESPONSE_METHODS, *_SCOPE])
    listed = listed_tools(_SCOPE)
    unused = never_called(listed, tool_calls(RANGE, _SCOPE))
    return (
        Panel(
            title="Response cost per hour (${currency})",
            description=(
                "Tool results, resources and prompts the model reads, priced as input tokens at "
                "${price_per_mtok} ${currency} per million, as a rate per hour per server. A server "
                "that climbs here is the first to shrink: see the cost by tool beside."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    f"{sum_by(per_server, rate(rate_selector, RATE_INTERVAL))} * 3600 * {_PRICE}",
                    legend="{{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                ),
            ),
            width=12,
        ),
        Panel(
            title="Response cost in range by tool (${currency})",
            description=(
                "The twenty tools whose responses cost most in the selected time range at "
                "${price_per_mtok} ${currency} per million input tokens. Shrink the top ones first."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"topk(20, {_response_tokens(RANGE, (names.SIDE, names.SERVER, names.TOOL), TOOLS_CALL)}"
                    f" * {_PRICE})",
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=12,
        ),
        Panel(
            title="Definition tax per conversation (${currency})",
            description=(
                "What each server's tool definitions cost in every conversation that lists them, and "
                "the part that pays for tools never called in the time range. Multiply by your "
                "conversations per day for the daily bill."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"{per_server_definition_tax(_SCOPE)} * {_PRICE}",
                    legend="all tools: {{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                    instant=True,
                ),
                Target(
                    f"{per_server_or_zero('sum', unused, listed, per_server)} * {_PRICE}",
                    legend="never called: {{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=24,
            height=7,
        ),
    )


def _host_cap_panels(settings: GeneratorSettings) -> tuple[Panel, ...]:
    cap = settings.host_cap
    return (
        Panel(
            title=HOST_CAP_PANEL,
            description=(
                f"Tool responses over {cap:,} tokens in the selected time range: hosts with that result "
                "cap (Claude Code's MAX_MCP_OUTPUT_TOKENS defaults to 25,000) refuse them whole. "
                "Paginate, or cap results in the server (McpToolResponsesOverHostCap)."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    over_host_cap(cap, RANGE, _SCOPE),
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=12,
            steps=(Step(None, "green"), Step(1, "red")),
        ),
        Panel(
            title="Responses over the host cap per interval",
            description=(
                f"Tool responses over {cap:,} tokens per interval, per tool: when they started and "
                "whether they keep coming. A steady line means every such call fails on those hosts."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    over_host_cap(cap, RATE_INTERVAL, _SCOPE),
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}}, {{mcp_tokens_side}})",
                ),
            ),
            width=12,
        ),
    )
