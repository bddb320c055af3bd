# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x budget scopes: the application's `budget_scope(...)` charges every exchange of a
conversation, on the client and (through W3C baggage in `_meta`) on the server, in both eras;
without one, each ClientSession is its own scope and the server charges its connection, or
nothing on 2026-07-28 (no session). Utilisation, levels and crossings are checked exactly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry.instrumentation.mcp_tokens import budget_scope
from opentelemetry.trace import SpanKind

from tests.integration.apps._line import IS_MCP2
from tests.integration.apps.lowlevel_server import build_server
from tests.integration.v2_support import (
    BUDGETED,
    Call,
    Telemetry,
    instrumented,
    record,
    request_tokens,
    response_tokens,
    select,
)

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(60),
]

if IS_MCP2:
    from mcp import Client

WINDOW = 1200
SCOPE = "conversation-42"
WARNING, CRITICAL = 0.75, 0.90


class _Driver:
    def __init__(self, client: Any) -> None:
        self.client = client


async def converse(mode: str, scoped: bool) -> list[Call]:
    """tools/list, then `sized` calls until the window overflows; the wire recorded."""
    async with Client(build_server(), mode=mode) as client:
        proxy = record(_Driver(client))
        with budget_scope(SCOPE, context_window=WINDOW) if scoped else _no_scope():
            await client.list_tools()
            for _ in range(3):
                await client.call_tool("sized", {"tokens_hint": 300})
    return [c for c in proxy.calls if c.method in BUDGETED]


class _no_scope:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def expected_budget(calls: list[Call]) -> list[tuple[int, str, str | None]]:
    """(used, level, newly crossed level) after each exchange, per the ledger's rules."""
    definitions, added, reached = 0, 0, 0
    states = []
    for call in calls:
        if call.method == "tools/list":
            definitions = response_tokens(call.method, call.result) or 0
        else:
            added += (request_tokens(call.method, call.params) or 0) + (
                response_tokens(call.method, call.result) or 0
            )
        used = definitions + added
        rank = 2 if used / WINDOW >= CRITICAL else 1 if used / WINDOW >= WARNING else 0
        crossed = ("ok", "warning", "critical")[rank] if rank > reached else None
        reached = max(reached, rank)
        states.append((used, ("ok", "warning", "critical")[rank], crossed))
    return states


def budget_spans(telemetry: Telemetry, kind: SpanKind) -> list[Any]:
    return [
        s
        for s in telemetry.spans()
        if s.kind is kind and (s.attributes or {}).get("mcp.method.name") in BUDGETED
    ]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_an_application_scope_is_charged_on_both_sides(mode: str) -> None:
    with instrumented(context_window=WINDOW) as telemetry:
        calls = anyio.run(converse, mode, True)
        states = expected_budget(calls)
        assert [level for _, level, _ in states] == ["ok", "ok", "warning", "critical"]
        for side, kind in (("client", SpanKind.CLIENT), ("server", SpanKind.SERVER)):
            spans = budget_spans(telemetry, kind)
            assert len(spans) == len(states), side
            for span, (used, level, _) in zip(spans, states, strict=True):
                attributes = span.attributes or {}
                assert attributes["mcp_tokens.budget.scope"] == SCOPE, side
                assert attributes["mcp_tokens.budget.used"] == used, side
                assert attributes["mcp_tokens.budget.utilization"] == round(used / WINDOW, 6)
                assert attributes["mcp_tokens.budget.level"] == level
            crossings = {
                a["mcp_tokens.budget.level"]: p.value
                for a, p in select(telemetry.points("mcp_tokens.budget.crossings"), mcp_tokens__side=side)
            }
            assert crossings == {"warning": 1, "critical": 1}, side
            utilization = select(telemetry.points("mcp_tokens.budget.utilization"), mcp_tokens__side=side)
            assert sum(p.count for _, p in utilization) == len(states)
            assert sum(p.sum for _, p in utilization) == pytest.approx(sum(u for u, _, _ in states) / WINDOW)
            assert {a["mcp_tokens.server.name"] for a, _ in utilization} == {"mcp-tokens-lowlevel"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_without_a_scope_each_session_is_one_and_modern_servers_have_none(mode: str) -> None:
    with instrumented(context_window=WINDOW) as telemetry:
        anyio.run(converse, mode, False)
        anyio.run(converse, mode, False)
        client_scopes = [
            (s.attributes or {})["mcp_tokens.budget.scope"] for s in budget_spans(telemetry, SpanKind.CLIENT)
        ]
        assert len(client_scopes) == 8 and len(set(client_scopes)) == 2  # one per ClientSession
        assert client_scopes[:4] == [client_scopes[0]] * 4
        server = [
            (s.attributes or {}).get("mcp_tokens.budget.scope")
            for s in budget_spans(telemetry, SpanKind.SERVER)
        ]
        if mode == "legacy":  # one scope per connection
            assert len(set(server)) == 2 and None not in server and not set(server) & set(client_scopes)
        else:  # 2026-07-28: no session, no baggage, no server budget
            assert server == [None] * 8
            assert not select(telemetry.points("mcp_tokens.budget.utilization"), mcp_tokens__side="server")


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_server_uses_the_context_window_the_agent_sent(mode: str) -> None:
    # The server's own default window is 100x larger: its utilisation can only equal the
    # client's if the scope's window travelled with the scope id in baggage.
    with instrumented(context_window=100 * WINDOW) as telemetry:
        calls = anyio.run(converse, mode, True)
        states = expected_budget(calls)
        spans = budget_spans(telemetry, SpanKind.SERVER)
        assert len(spans) == len(states)
        for span, (used, level, _) in zip(spans, states, strict=True):
            attributes = span.attributes or {}
            assert attributes["mcp_tokens.budget.utilization"] == round(used / WINDOW, 6)
            assert attributes["mcp_tokens.budget.level"] == level
