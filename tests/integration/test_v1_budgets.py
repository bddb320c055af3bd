# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x budget scopes: one per ClientSession by default, `budget_scope()` across servers, the
scope travelling to servers in baggage (even with baggage propagation off), utilisation and
crossings against a small context window, exact `used` totals on both sides."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from opentelemetry import propagate
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tests.integration.apps._line import IS_MCP1, describe

if not IS_MCP1:
    pytest.skip(f"mcp 1.x instrumentation tests; this interpreter has {describe()}", allow_module_level=True)

from opentelemetry.instrumentation.mcp_tokens import budget_scope

from tests.integration._v1_support import (
    CaseResult,
    Expected,
    SpanRecord,
    Telemetry,
    run_case,
    run_session,
)
from tests.integration.apps import payloads
from tests.integration.apps.client import Target, connect

pytestmark = pytest.mark.timeout(120)

WINDOW = 3000  # small enough that one standard session crosses both levels
CONVERSATION_WINDOW = 50_000
ARGUMENTS = dict(payloads.STANDARD_CALLS)
# tools/list, every tool, both resources, the prompt.
BUDGETED_EXCHANGES = 1 + len(payloads.TOOL_NAMES) + len(payloads.RESOURCES) + 1


@pytest.fixture(scope="module")
def telemetry() -> Iterator[Telemetry]:
    telemetry = Telemetry(context_window=WINDOW)
    yield telemetry
    telemetry.close()


@pytest.fixture(scope="module")
def expected() -> Expected:
    return Expected()


def listing(flavour: str) -> list[dict[str, Any]]:
    async def tools() -> list[dict[str, Any]]:
        async with connect(Target(flavour, "memory")) as driver:
            return await driver.list_tools()

    return anyio.run(tools)


def session_tokens(expected: Expected, tools: list[dict[str, Any]]) -> int:
    """What one standard session puts in a context window: definitions, arguments, results,
    resources and the prompt (sampling is a separate model call and is not charged)."""
    total = sum(expected.tool_definition(tool) for tool in tools)
    for tool, arguments in payloads.STANDARD_CALLS:
        total += expected.json(arguments)
        if tool != "boom":
            total += expected.tool_result(tool, arguments)
    total += sum(expected.resource(uri) for uri in payloads.RESOURCES)
    return total + expected.prompt("x = 1")


def budgeted(spans: list[SpanRecord], kind: str) -> list[SpanRecord]:
    return [s for s in spans if s.kind == kind and "mcp_tokens.budget.scope" in s.attributes]


def level_of(utilization: float) -> str:
    return "critical" if utilization >= 0.9 else "warning" if utilization >= 0.75 else "ok"


def test_default_scopes_fill_and_cross_on_both_sides(telemetry: Telemetry, expected: Expected) -> None:
    total = session_tokens(expected, listing("lowlevel"))
    assert total > WINDOW
    case = run_case(telemetry, "lowlevel", "memory")
    for kind, side in (("CLIENT", "client"), ("SERVER", "server")):
        spans = budgeted(case.spans, kind)
        assert len(spans) == BUDGETED_EXCHANGES
        assert len({s.attributes["mcp_tokens.budget.scope"] for s in spans}) == 1
        assert max(s.attributes["mcp_tokens.budget.used"] for s in spans) == total
        for span in spans:
            utilization = span.attributes["mcp_tokens.budget.utilization"]
            assert utilization == round(span.attributes["mcp_tokens.budget.used"] / WINDOW, 6)
            assert span.attributes["mcp_tokens.budget.level"] == level_of(utilization)
        crossings = {
            p.attributes["mcp_tokens.budget.level"]: p.value
            for p in case.points_of("mcp_tokens.budget.crossings", mcp_tokens__side=side)
        }
        assert crossings == {"warning": 1, "critical": 1}
        (histogram,) = case.points_of(
            "mcp_tokens.budget.utilization",
            mcp_tokens__side=side,
            mcp_tokens__server__name=payloads.SERVER_NAMES["lowlevel"],
        )
        assert histogram.count == BUDGETED_EXCHANGES
        assert "mcp_tokens.budget.scope" not in histogram.attributes


def test_each_client_session_is_its_own_scope(telemetry: Telemetry) -> None:
    telemetry.reset()
    for _ in range(2):
        run_session(Target("lowlevel", "memory"), "sdk", ())
    spans, _ = telemetry.collect()
    assert len({s.attributes["mcp_tokens.budget.scope"] for s in budgeted(spans, "CLIENT")}) == 2


def test_one_conversation_across_two_servers(telemetry: Telemetry, expected: Expected) -> None:
    flavours = ("lowlevel", "sdk_fastmcp")
    total = sum(session_tokens(expected, listing(flavour)) for flavour in flavours)
    telemetry.reset()
    with budget_scope("conversation-42", context_window=CONVERSATION_WINDOW):
        for flavour in flavours:
            run_session(Target(flavour, "memory"), "sdk", ())
    spans, points = telemetry.collect()
    case = CaseResult("two servers", "memory", "sdk", report=None, spans=spans, points=points)  # type: ignore[arg-type]
    client, server = budgeted(spans, "CLIENT"), budgeted(spans, "SERVER")
    assert len(client) == len(server) == 2 * BUDGETED_EXCHANGES
    # The servers learned the scope from baggage in _meta; each side keeps its own ledger,
    # so this process (client and server at once) does not count the conversation twice.
    assert {s.attributes["mcp_tokens.budget.scope"] for s in client + server} == {"conversation-42"}
    assert max(s.attributes["mcp_tokens.budget.used"] for s in client) == total
    assert max(s.attributes["mcp_tokens.budget.used"] for s in server) == total
    assert max(s.attributes["mcp_tokens.budget.utilization"] for s in client) == round(
        total / CONVERSATION_WINDOW, 6
    )
    # The window is the agent's: it travels in baggage with the scope id, so the servers'
    # utilisation is the conversation's, not a fraction of their own default window.
    assert max(s.attributes["mcp_tokens.budget.utilization"] for s in server) == round(
        total / CONVERSATION_WINDOW, 6
    )
    assert case.points_of("mcp_tokens.budget.crossings", mcp_tokens__side="client") == []


def test_the_scope_travels_without_a_baggage_propagator(telemetry: Telemetry) -> None:
    original = propagate.get_global_textmap()
    propagate.set_global_textmap(TraceContextTextMapPropagator())
    try:
        telemetry.reset()
        with budget_scope("conversation-7", context_window=CONVERSATION_WINDOW):
            run_session(Target("lowlevel", "memory"), "sdk", ())
        spans, _ = telemetry.collect()
    finally:
        propagate.set_global_textmap(original)
    server = budgeted(spans, "SERVER")
    assert server and {s.attributes["mcp_tokens.budget.scope"] for s in server} == {"conversation-7"}
    assert all(
        s.attributes["mcp_tokens.budget.utilization"]
        == round(s.attributes["mcp_tokens.budget.used"] / CONVERSATION_WINDOW, 6)
        for s in server
    )
    client_ids = {s.span_id for s in spans if s.kind == "CLIENT"}
    assert all(s.parent_id in client_ids for s in server)  # traceparent still parents them
