# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x, in process: the SDK's `Client` (and fastmcp 4's) against each server flavour in
memory, both eras: the handshake era over the in-memory stream transport (JSON-RPC) and the
2026-07-28 era over `DirectDispatcher` (no JSON-RPC, no SDK client span). Client and server
are in this process, so both sides' spans and metrics are checked exactly."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry.trace import SpanKind

from tests.integration.apps import payloads
from tests.integration.apps._line import HAS_FASTMCP, IS_MCP2
from tests.integration.apps.client import Target
from tests.integration.v2_checks import (
    check_client_spans,
    check_durations,
    check_sampling_spans,
    check_server_spans,
    check_side_metrics,
    expected_exchanges,
    is_exchange_client_span,
)
from tests.integration.v2_support import MODERN_VERSION, instrumented, run_session

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(120),
]


def _cases() -> list[Any]:
    flavours = ["lowlevel", "sdk_fastmcp"] + (["fastmcp"] if HAS_FASTMCP else [])
    cases = [pytest.param(f, era, "sdk", id=f"{f}-{era}") for f in flavours for era in ("legacy", "modern")]
    if HAS_FASTMCP:
        cases += [
            pytest.param("fastmcp", era, "fastmcp", id=f"fastmcp-client-{era}")
            for era in ("legacy", "modern")
        ]
    return cases


@pytest.mark.parametrize(("flavour", "era", "client"), _cases())
def test_in_memory_session_is_exact_on_both_sides(flavour: str, era: str, client: str) -> None:
    with instrumented() as telemetry:
        session = anyio.run(lambda: run_session(Target(flavour, "memory"), client=client, era=era))
        spans = telemetry.spans()
        server_name = payloads.SERVER_NAMES[flavour]
        assert session.server_name == server_name
        assert (session.protocol_version == MODERN_VERSION) is (era == "modern")

        # The SDK's `Client(server)` runs 2026-07-28 over DirectDispatcher (no wire id);
        # fastmcp's in-memory transport always speaks JSON-RPC over memory streams.
        direct = client == "sdk" and era == "modern"
        pairs = check_client_spans(spans, session, jsonrpc=not direct, network={})
        check_server_spans(spans, pairs)
        # The handshake (send_discover bypasses the session's funnel): one CLIENT span, its
        # SERVER child, the negotiated version; it names the server for every later exchange.
        handshake = "server/discover" if era == "modern" else "initialize"
        (opening,) = [s for s in spans if is_exchange_client_span(s, handshake)]
        assert opening.attributes["mcp.protocol.version"] == session.protocol_version
        children = [s for s in spans if s.parent is not None and s.parent.span_id == opening.context.span_id]
        assert [(s.name, s.kind) for s in children] == [(handshake, SpanKind.SERVER)]
        check_sampling_spans(spans, session, server_side=era == "legacy")

        client_calls = expected_exchanges(session, era, sampled=True)
        server_calls = expected_exchanges(session, era, sampled=era == "legacy")
        check_side_metrics(telemetry, "client", client_calls, server_name, budgeted=True)
        # 2026-07-28 has no session: without baggage, the server has no budget scope.
        check_side_metrics(telemetry, "server", server_calls, server_name, budgeted=era == "legacy")
        check_durations(
            telemetry, "mcp.client.operation.duration", session.exchanges, session.protocol_version
        )
        check_durations(
            telemetry, "mcp.server.operation.duration", session.exchanges, session.protocol_version
        )

        sessions = {side: telemetry.points(f"mcp.{side}.session.duration") for side in ("client", "server")}
        for side, points in sessions.items():
            assert sum(p.count for _, p in points) == (1 if era == "legacy" else 0), side
            for attributes, _ in points:
                assert attributes["mcp.protocol.version"] == session.protocol_version

        assert telemetry.ends.ends and set(telemetry.ends.ends.values()) == {1}
        assert len(telemetry.ends.ends) == len(spans)
