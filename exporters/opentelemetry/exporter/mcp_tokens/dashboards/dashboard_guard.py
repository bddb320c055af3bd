# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The Guardrails rows of the overview and tool dashboards: what the opt-in guard did.

The guard's counters exist only where a guard setting is on; elsewhere these panels
are empty ("No data"), which is the answer: nothing was cut.
"""

from __future__ import annotations

from . import names
from .dashboard_common import JOB, RESPONSE, SERVER, SIDE, TOOL, TOOLS_CALL
from .model import Panel, Target
from .promql import RATE_INTERVAL, increase, rate, series, sum_by
from .queries import GUARD_CUT

_SCOPE = [JOB, SIDE, SERVER]
_TOOL = [*_SCOPE, TOOLS_CALL, TOOL]


def guardrails_overview() -> tuple[Panel, ...]:
    return (
        Panel(
            title="Guard actions by tool",
            description=(
                "Results the guard cut (truncated), refused (rejected) or only warned about, per "
                "interval, by tool and reason (result_limit, budget, repeat). A tool that is cut "
                "often should paginate (runbook: McpToolFrequentlyCut). Empty unless "
                "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD or ..._GUARD_BUDGET is on."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.TOOL, names.GUARD_ACTION, names.GUARD_REASON),
                        increase(series(names.GUARD_ACTIONS_TOTAL, _SCOPE), RATE_INTERVAL),
                    ),
                    legend="{{gen_ai_tool_name}} {{mcp_tokens_guard_action}} ({{mcp_tokens_guard_reason}})",
                ),
            ),
            stacked=True,
        ),
        Panel(
            title="Tokens the guard kept out of context",
            description=(
                "Tokens per second of results that were not delivered: what the tools returned "
                "minus what the guard delivered (counted exactly, after the response). "
                "mcp_tokens_payload counts what was delivered, so this is the rest."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.SERVER, names.TOOL),
                        rate(series(names.GUARD_REMOVED_TOTAL, _SCOPE), RATE_INTERVAL),
                    ),
                    legend="{{mcp_tokens_server_name}} {{gen_ai_tool_name}}",
                ),
            ),
            minimum=0,
        ),
        Panel(
            title="Results the guard could not act on",
            description=(
                "Results delivered unchanged because the guard failed open: no exact tokenizer "
                "(not loaded yet at start-up, or none configured that the guard can use) or an "
                "error inside the guard (logged once). Any steady rate means results over their "
                "limit reach the model."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.SIDE, names.GUARD_FAILURE),
                        increase(series(names.GUARD_FAILURES_TOTAL, [JOB, SIDE]), RATE_INTERVAL),
                    ),
                    legend="{{mcp_tokens_side}} {{mcp_tokens_guard_failure}}",
                ),
            ),
        ),
    )


def guardrails_tool() -> tuple[Panel, ...]:
    cut = sum_by((names.SIDE,), rate(series(names.GUARD_ACTIONS_TOTAL, [*_TOOL, GUARD_CUT]), RATE_INTERVAL))
    calls = sum_by((names.SIDE,), rate(series(f"{names.PAYLOAD}_count", [*_TOOL, RESPONSE]), RATE_INTERVAL))
    return (
        Panel(
            title="Results cut or refused by the guard",
            description=(
                "Share of this tool's calls whose result the guard cut or refused, per side. "
                "Above 10% for 30 minutes alerts (McpToolFrequentlyCut): the tool should paginate, "
                "or get its own limit."
            ),
            kind="timeseries",
            unit="percentunit",
            targets=(Target(f"{cut}\n/\n{calls}", legend="{{mcp_tokens_side}}"),),
            minimum=0,
        ),
        Panel(
            title="Guard actions by reason",
            description=(
                "This tool's results the guard acted on, per interval, by action and reason: "
                "result_limit (over its limit), budget (over what was left of the context window), "
                "repeat (the same arguments called again and again)."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by(
                        (names.GUARD_ACTION, names.GUARD_REASON),
                        increase(series(names.GUARD_ACTIONS_TOTAL, _TOOL), RATE_INTERVAL),
                    ),
                    legend="{{mcp_tokens_guard_action}} ({{mcp_tokens_guard_reason}})",
                ),
            ),
            stacked=True,
        ),
        Panel(
            title="Tokens removed by the guard",
            description=(
                "Tokens per second of this tool's results that the guard did not deliver, per side. "
                "A steady rate is context the model was spared, and answers it had to ask for again."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by((names.SIDE,), rate(series(names.GUARD_REMOVED_TOTAL, _TOOL), RATE_INTERVAL)),
                    legend="{{mcp_tokens_side}}",
                ),
            ),
            minimum=0,
        ),
    )
