# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""MCP tokens / Context budget: how full agents' context windows get, and who fills them."""

from __future__ import annotations

from . import names
from .dashboard_common import (
    BUDGET_UID,
    JOB,
    LINK_TAG,
    SERVER,
    SIDE,
    TAGS,
    budget_steps,
    common_variables,
    definition_tax,
)
from .model import Dashboard, Panel, Row, Step, Target
from .promql import RANGE, RATE_INTERVAL, increase, quantile, series, sum_by
from .settings import GeneratorSettings

_SCOPES = [JOB, SIDE, SERVER]


def budget_dashboard(settings: GeneratorSettings) -> Dashboard:
    return Dashboard(
        uid=BUDGET_UID,
        title="MCP tokens / Context budget",
        description=(
            "Budget scopes (a conversation, or one ClientSession by default): how much of their "
            "context window MCP payloads fill, which scopes cross the warning and critical "
            "levels, and how much of the window tool definitions take before the first call."
        ),
        tags=TAGS,
        variables=common_variables(),
        rows=(
            Row("Utilisation", _utilisation(settings)),
            Row("Crossings", _crossings()),
            Row("Tool definition tax", _definitions(settings)),
        ),
        links_tag=LINK_TAG,
    )


def _utilisation(settings: GeneratorSettings) -> tuple[Panel, ...]:
    buckets = series(f"{names.BUDGET_UTILIZATION}_bucket", _SCOPES)
    budget = settings.budget
    return (
        Panel(
            title="Budget utilisation heatmap",
            description=(
                "Exchanges per interval by the utilisation of their scope's context window right "
                "after the exchange (buckets up to 150%: past 100% the window has overflowed). "
                f"Heat at or above {budget.warning:.0%} means conversations run long on MCP "
                "payloads: shrink the tools that dominate them."
            ),
            kind="heatmap",
            unit="short",
            y_axis_unit="percentunit",
            targets=(
                Target(
                    sum_by((names.LE,), increase(buckets, RATE_INTERVAL)),
                    legend="{{le}}",
                    format="heatmap",
                ),
            ),
            height=9,
        ),
        Panel(
            title="Budget utilisation (p50, p90, p99)",
            description=(
                "Percentiles of scope utilisation after each exchange, with the warning "
                f"({budget.warning:.0%}) and critical ({budget.critical:.0%}) levels dashed. When "
                "p90 approaches critical, most conversations will lose early context: cut the "
                "definition tax and the largest responses first."
            ),
            kind="timeseries",
            unit="percentunit",
            targets=tuple(
                Target(
                    quantile(q, (names.SIDE,), buckets, RATE_INTERVAL),
                    legend=f"p{round(q * 100)} ({{{{mcp_tokens_side}}}})",
                )
                for q in (0.5, 0.9, 0.99)
            ),
            height=9,
            steps=budget_steps(settings),
            threshold_lines=True,
            minimum=0,
        ),
    )


def _crossings() -> tuple[Panel, ...]:
    crossings = series(names.BUDGET_CROSSINGS_TOTAL, [JOB, SIDE])
    return (
        Panel(
            title="Scopes crossing warning and critical",
            description=(
                "Budget scopes per interval that reached the warning or critical level for the "
                "first time. Each scope crosses each level at most once. Critical crossings alert "
                "(McpBudgetCriticalCrossings); this metric has no server label."
            ),
            kind="timeseries",
            unit="short",
            targets=(
                Target(
                    sum_by((names.SIDE, names.BUDGET_LEVEL), increase(crossings, RATE_INTERVAL)),
                    legend="{{mcp_tokens_budget_level}} ({{mcp_tokens_side}})",
                ),
            ),
            width=16,
        ),
        Panel(
            title="Crossings in range",
            description=(
                "Scopes that crossed each level during the selected time range. Compare critical "
                "with warning: if most scopes that warn go on to critical, the warning level gives "
                "agents no time to react."
            ),
            kind="stat",
            unit="short",
            targets=(
                Target(
                    sum_by((names.BUDGET_LEVEL,), increase(crossings, RANGE)),
                    legend="{{mcp_tokens_budget_level}}",
                    instant=True,
                ),
            ),
            width=8,
        ),
    )


def _definitions(settings: GeneratorSettings) -> tuple[Panel, ...]:
    window = settings.context_window
    share = settings.definition_share
    steps = (Step(None, "green"), Step(share / 2, "orange"), Step(share, "red"))
    return (
        Panel(
            title="Tool definition tax versus the context window",
            description=(
                "Each server's tools/list as a share of a "
                f"{window}-token context window: an agent pays it in every conversation before "
                f"its first call. Red from {share:.0%} (McpToolDefinitionTaxHigh): shorten "
                "descriptions, flatten schemas, split the server or filter tools per agent."
            ),
            kind="bargauge",
            unit="percentunit",
            targets=(
                Target(
                    f"{definition_tax(_SCOPES)}\n/ {window}",
                    legend="{{mcp_tokens_server_name}} ({{mcp_tokens_side}})",
                    instant=True,
                ),
            ),
            width=10,
            steps=steps,
            minimum=0,
        ),
        Panel(
            title="All servers together",
            description=(
                f"Definition tokens of every selected server together, as a share of a {window}-token "
                "window: what an agent connected to all of them pays before its first call. Remove "
                "servers (or tools) an agent does not need."
            ),
            kind="stat",
            unit="percentunit",
            targets=(
                Target(
                    f"sum by ({names.SIDE}) ({definition_tax(_SCOPES)})\n/ {window}",
                    legend="{{mcp_tokens_side}}",
                ),
            ),
            width=4,
            steps=steps,
        ),
        Panel(
            title="Largest tool definitions",
            description=(
                "The twenty tools with the largest definitions in tokens. Long descriptions with "
                "examples and deep input schemas are the usual cause; move examples to a resource."
            ),
            kind="bargauge",
            unit="short",
            targets=(
                Target(
                    f"topk(20, max by ({names.SERVER}, {names.TOOL}) "
                    f"({series(names.TOOL_DEFINITION, _SCOPES)}))",
                    legend="{{gen_ai_tool_name}} ({{mcp_tokens_server_name}})",
                    instant=True,
                ),
            ),
            width=10,
        ),
    )
