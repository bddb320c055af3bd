# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the three dashboards share: variables, label matchers, colours and links."""

from __future__ import annotations

from . import names
from .model import SeriesColor, Step, Variable, datasource_variable, query_variable
from .promql import eq, series, variable
from .settings import GeneratorSettings

TAGS = ("mcp", "mcp-tokens", "opentelemetry")
LINK_TAG = "mcp-tokens"

OVERVIEW_UID = "mcp-tokens-overview"
TOOL_UID = "mcp-tokens-tool"
BUDGET_UID = "mcp-tokens-budget"

JOB = variable(names.JOB)
SIDE = variable(names.SIDE)
SERVER = variable(names.SERVER)
# A regex matcher even though the variable is single-valued: substituting ".*" for it
# (as the live query check does) then still selects every tool.
TOOL = variable(names.TOOL)
RESPONSE = eq(names.DIRECTION, names.RESPONSE)
REQUEST = eq(names.DIRECTION, names.REQUEST)
TOOLS_CALL = eq(names.METHOD, names.TOOLS_CALL)

# The series every variable lists its values from: it exists as soon as one payload
# has been analysed, on either side.
_LISTING = f"{names.PAYLOAD}_count"

RISK_COLORS = (
    SeriesColor("low", "green"),
    SeriesColor("medium", "yellow"),
    SeriesColor("high", "orange"),
    SeriesColor("critical", "red"),
)


def common_variables() -> tuple[Variable, ...]:
    return (
        datasource_variable(),
        query_variable(
            names.JOB,
            "Job",
            series(_LISTING),
            description="Prometheus jobs that scrape processes instrumented with mcp-tokens.",
        ),
        query_variable(
            names.SIDE,
            "Side",
            series(_LISTING, [JOB]),
            description=(
                "client: measured in the agent (ClientSession); server: measured in the MCP server. "
                "When both ends are instrumented each call is counted once per side: pick one."
            ),
        ),
        query_variable(
            names.SERVER,
            "MCP server",
            series(_LISTING, [JOB, SIDE]),
            description="The MCP server's name from its initialize/discover response.",
            # Keep series whose server name is unknown (empty label) when All is selected.
            all_value=".*",
        ),
    )


def tool_variable() -> Variable:
    return Variable(
        name=names.TOOL,
        label="Tool",
        kind="query",
        query=f"label_values({series(_LISTING, [JOB, SIDE, SERVER, TOOLS_CALL])}, {names.TOOL})",
        description="The tool to drill into (names outside the server's listing appear as _OTHER).",
        multi=False,
        include_all=False,
    )


def risk_steps(settings: GeneratorSettings) -> tuple[Step, ...]:
    """Colours of the risk tiers as token thresholds (low green ... critical red)."""
    risk = settings.risk
    return (
        Step(None, "green"),
        Step(risk.low, "yellow"),
        Step(risk.medium, "orange"),
        Step(risk.high, "red"),
    )


def budget_steps(settings: GeneratorSettings) -> tuple[Step, ...]:
    return (
        Step(None, "green"),
        Step(settings.budget.warning, "orange"),
        Step(settings.budget.critical, "red"),
    )


def tool_drilldown_url() -> str:
    """A data link from any series with tool labels to the tool dashboard, keeping context."""
    return (
        f"/d/{TOOL_UID}?${{datasource:queryparam}}&${{job:queryparam}}"
        f"&var-{names.SIDE}=${{__field.labels.{names.SIDE}}}"
        f"&var-{names.SERVER}=${{__field.labels.{names.SERVER}}}"
        f"&var-{names.TOOL}=${{__field.labels.{names.TOOL}}}&${{__url_time_range}}"
    )


def definition_tax(matchers: list[str]) -> str:
    """Definition tokens per side and server; max per tool first so replicas count once."""
    per_tool = (
        f"max by ({names.SIDE}, {names.SERVER}, {names.TOOL}) ({series(names.TOOL_DEFINITION, matchers)})"
    )
    return f"sum by ({names.SIDE}, {names.SERVER}) ({per_tool})"
