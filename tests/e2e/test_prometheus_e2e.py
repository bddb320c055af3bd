# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A real Prometheus scrapes the instrumented demo processes (both run under
`opentelemetry-instrument --metrics_exporter prometheus`):

- its query API returns exactly the token sums tiktoken gives for the payloads sent;
- it accepts every PromQL expression of every dashboard panel, variable and rule;
- every dashboard panel the demo feeds returns data, and every recording rule produces series.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.dashboards import all_expressions
from opentelemetry.exporter.mcp_tokens.dashboards.expressions import dashboard_expressions
from opentelemetry.exporter.mcp_tokens.dashboards.hostlimits import TOOL_LIMIT_PANEL
from opentelemetry.exporter.mcp_tokens.dashboards.settings import GeneratorSettings

from .conftest import DemoStack
from .expected import EXACT_CALLS, overhead_by_tool_and_kind, risk_by_tool, totals_by_tool

pytestmark = pytest.mark.slow

EXACT_TIMEOUT_S = 30.0
DEMO_DATA_TIMEOUT_S = 30.0

# The metric contract of docs/telemetry.md, in Prometheus form.
HISTOGRAMS = (
    "mcp_client_operation_duration_seconds",
    "mcp_server_operation_duration_seconds",
    "mcp_client_session_duration_seconds",
    "mcp_server_session_duration_seconds",
    "mcp_tokens_payload",
    "mcp_tokens_budget_utilization",
    "mcp_tokens_analysis_duration_seconds",
)
CONTRACT_METRICS = frozenset(
    [f"{name}_{suffix}" for name in HISTOGRAMS for suffix in ("bucket", "sum", "count")]
    + [
        "mcp_tokens_overhead_total",
        "mcp_tokens_responses_total",
        "mcp_tokens_budget_crossings_total",
        "mcp_tokens_padding_detections_total",
        "mcp_tokens_analysis_skipped_total",
        "mcp_tokens_guard_actions_total",
        "mcp_tokens_guard_removed_total",
        "mcp_tokens_guard_failures_total",
        "mcp_tokens_tool_definition",
        "mcp_tokens_host_over_limit_total",
        "mcp_tokens_tools",
    ]
)
# The demo never overloads the instrumentation, so nothing is skipped or estimated; and it
# runs without a guard (test_guard_third_party.py checks the Guardrails panels live).
NOT_FED_BY_DEMO = frozenset(
    {
        "mcp_tokens_analysis_skipped_total",
        "mcp_tokens_guard_actions_total",
        "mcp_tokens_guard_removed_total",
        "mcp_tokens_guard_failures_total",
        # The demo chooses no HOSTS (tests/e2e/test_claude_e2e.py counts responses over them).
        "mcp_tokens_host_over_limit_total",
    }
)
# No server of the demo or of the worker deployments lists more tools than a host takes: the
# panel of servers over a host's tool limit is rightly empty (tests/cli/test_hosts.py has one).
EMPTY_UNLESS_A_SERVER_IS_OVER_A_TOOL_LIMIT = (repr(TOOL_LIMIT_PANEL),)
# The demo calls every tool it lists: the per-tool never-called list is empty here (as it should
# be); test_economics_e2e.py runs with tools never called and checks these numbers exactly.
EMPTY_WHEN_EVERY_TOOL_IS_CALLED = (
    "'Tools never called, by definition tokens'",
    "mcp_tokens_tool_definition:never_called1d",
)
DEMO_JOBS = "demo-server|demo-client"
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def _by_tool(result: list[dict[str, Any]]) -> dict[str, float]:
    return {item["metric"].get("gen_ai_tool_name", ""): float(item["value"][1]) for item in result}


@pytest.mark.parametrize("side", ["server", "client"])
@pytest.mark.parametrize("direction", ["response", "request"])
def test_prometheus_returns_the_exact_token_sums(demo_stack: DemoStack, side: str, direction: str) -> None:
    assert demo_stack.reports["exact-client"]["errors"] == []
    want = {tool: float(getattr(totals, direction)) for tool, totals in totals_by_tool().items()}
    expr = (
        "sum by (gen_ai_tool_name) (mcp_tokens_payload_sum{"
        f'job="exact-{side}", mcp_tokens_side="{side}", mcp_method_name="tools/call", '
        f'mcp_tokens_direction="{direction}"}})'
    )
    got = _by_tool(demo_stack.prometheus.wait_until(expr, lambda r: _by_tool(r) == want, EXACT_TIMEOUT_S))
    assert got == want
    total = demo_stack.prometheus.vector(expr.replace("sum by (gen_ai_tool_name)", "sum"))
    assert float(total[0]["value"][1]) == sum(want.values())


@pytest.mark.parametrize("side", ["server", "client"])
def test_prometheus_counts_every_call_once(demo_stack: DemoStack, side: str) -> None:
    want = {tool: float(totals.calls) for tool, totals in totals_by_tool().items()}
    expr = (
        "sum by (gen_ai_tool_name) (mcp_tokens_payload_count{"
        f'job="exact-{side}", mcp_tokens_side="{side}", mcp_method_name="tools/call", '
        'mcp_tokens_direction="response"})'
    )
    got = _by_tool(demo_stack.prometheus.wait_until(expr, lambda r: _by_tool(r) == want, EXACT_TIMEOUT_S))
    assert got == want
    assert sum(got.values()) == len(EXACT_CALLS)


def _by_labels(result: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(item["metric"].get(label, "") for label in labels): float(item["value"][1])
        for item in result
        if float(item["value"][1]) != 0
    }


@pytest.mark.parametrize("side", ["server", "client"])
def test_prometheus_returns_the_exact_overhead_by_kind(demo_stack: DemoStack, side: str) -> None:
    want = {key: float(value) for key, value in overhead_by_tool_and_kind().items()}
    assert {kind for _, kind in want} == {"formatting", "duplicate", "structure"}
    expr = (
        "sum by (gen_ai_tool_name, mcp_tokens_overhead_kind) (mcp_tokens_overhead_total{"
        f'job="exact-{side}", mcp_tokens_side="{side}", mcp_method_name="tools/call"}})'
    )
    labels = ("gen_ai_tool_name", "mcp_tokens_overhead_kind")
    result = demo_stack.prometheus.wait_until(expr, lambda r: _by_labels(r, *labels) == want, EXACT_TIMEOUT_S)
    assert _by_labels(result, *labels) == want


@pytest.mark.parametrize("side", ["server", "client"])
def test_prometheus_counts_responses_by_risk_tier(demo_stack: DemoStack, side: str) -> None:
    want = {key: float(value) for key, value in risk_by_tool().items()}
    assert {tier for _, tier in want} == {"low", "medium", "high", "critical"}
    expr = (
        "sum by (gen_ai_tool_name, mcp_tokens_risk) (mcp_tokens_responses_total{"
        f'job="exact-{side}", mcp_tokens_side="{side}", mcp_method_name="tools/call"}})'
    )
    labels = ("gen_ai_tool_name", "mcp_tokens_risk")
    result = demo_stack.prometheus.wait_until(expr, lambda r: _by_labels(r, *labels) == want, EXACT_TIMEOUT_S)
    assert _by_labels(result, *labels) == want


def test_prometheus_accepts_every_dashboard_and_rule_expression(demo_stack: DemoStack) -> None:
    expressions = all_expressions()
    assert len(expressions) > 40
    rejected = []
    for expression in expressions:
        answer = demo_stack.prometheus.query(expression.substituted())
        if answer.get("status") != "success":
            rejected.append(f"{expression.source}: {answer.get('error')}")
    assert rejected == []


def _referenced_metrics(expr: str) -> set[str]:
    return set(_IDENTIFIER.findall(expr)) & CONTRACT_METRICS


def _wait_for_demo_series(demo_stack: DemoStack) -> set[str]:
    """Metric names the demo jobs export, once Prometheus holds enough samples for 1m rates."""
    expr = f'count_over_time(mcp_tokens_payload_count{{job=~"{DEMO_JOBS}"}}[1m])'
    demo_stack.prometheus.wait_until(
        expr, lambda r: any(float(i["value"][1]) >= 3 for i in r), DEMO_DATA_TIMEOUT_S
    )
    names = demo_stack.prometheus.vector(f'count by (__name__) ({{job=~"{DEMO_JOBS}"}})')
    return {item["metric"]["__name__"] for item in names}


def test_every_panel_fed_by_the_demo_returns_data(demo_stack: DemoStack) -> None:
    exported = _wait_for_demo_series(demo_stack)
    empty, not_fed, checked = [], [], 0
    for expression in dashboard_expressions(GeneratorSettings()):
        referenced = _referenced_metrics(expression.expr)
        assert referenced, f"{expression.source} references no contract metric: {expression.expr}"
        if not referenced <= exported:
            not_fed.append((expression.source, referenced - exported))
            continue
        checked += 1
        if any(
            name in expression.source
            for name in (*EMPTY_WHEN_EVERY_TOOL_IS_CALLED, *EMPTY_UNLESS_A_SERVER_IS_OVER_A_TOOL_LIMIT)
        ):
            continue
        if not demo_stack.prometheus.vector(expression.substituted({"job": DEMO_JOBS})):
            empty.append(f"{expression.source}: {expression.expr}")
    print(f"\n{checked} dashboard expressions returned data; not fed by the demo: {not_fed}")
    assert empty == []
    assert checked >= 40
    # Only panels about skipped analysis and the guard may lack data: the demo feeds everything else.
    assert {name for _, missing in not_fed for name in missing} <= NOT_FED_BY_DEMO, not_fed


def test_every_recording_rule_produces_series_for_the_demo(demo_stack: DemoStack) -> None:
    _wait_for_demo_series(demo_stack)
    rules = demo_stack.prometheus.vector('count by (__name__) ({__name__=~"job_.+:.+"})')
    produced = {item["metric"]["__name__"] for item in rules}
    expected = {
        e.source.split()[2]
        for e in all_expressions()
        if e.source.startswith("prometheus/rules.yaml")
        and not any(name in e.source for name in EMPTY_WHEN_EVERY_TOOL_IS_CALLED)
    }
    assert expected, "no recording rules found"
    missing = sorted(expected - produced)
    if missing:
        # Rules evaluate every second; give the last group one more round.
        rules = demo_stack.prometheus.wait_until(
            'count by (__name__) ({__name__=~"job_.+:.+"})',
            lambda r: expected <= {i["metric"]["__name__"] for i in r},
            10.0,
        )
        missing = sorted(expected - {item["metric"]["__name__"] for item in rules})
    assert missing == []
