# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x over HTTP, both sides in this process (uvicorn in a background thread): SSE,
streamable HTTP stateful and stateless (handshake era) and the 2026-07-28 HTTP path, for each
server flavour, plus fastmcp 4's client. Checks the exact counts on both sides, one trace per
call, the semconv network attributes, sessions where they exist, budget scopes (none on the
server without baggage where there is no session) and that the synthetic tools/list the
2026-07-28 path runs before a tools/call is not counted as a listing."""

from __future__ import annotations

import time
from collections.abc import Iterator
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
)
from tests.integration.v2_support import AMBIENT_SPAN, HttpServers, Telemetry, instrumented, run_session

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(120),
]

FLAVOURS = ["lowlevel", "sdk_fastmcp"] + (["fastmcp"] if HAS_FASTMCP else [])
APPS = ("sse", "streamable-http", "stateless-http")
# (transport the client uses, era, app it talks to)
MODES = {
    "sse": ("sse", "legacy", "sse"),
    "stateful": ("streamable-http", "legacy", "streamable-http"),
    "stateless": ("stateless-http", "legacy", "stateless-http"),
    "modern": ("streamable-http", "modern", "streamable-http"),
}
SESSION_WAIT_S = 5.0


@pytest.fixture(scope="module")
def servers() -> Iterator[HttpServers]:
    with HttpServers([(flavour, app) for flavour in FLAVOURS for app in APPS]) as running:
        yield running


def _cases() -> list[Any]:
    cases = [pytest.param(f, mode, "sdk", id=f"{f}-{mode}") for f in FLAVOURS for mode in MODES]
    if HAS_FASTMCP:
        cases += [
            pytest.param("fastmcp", m, "fastmcp", id=f"fastmcp-client-{m}") for m in ("stateful", "modern")
        ]
    return cases


def _wait_for_points(telemetry: Telemetry, metric: str, number: int) -> list[Any]:
    deadline = time.monotonic() + SESSION_WAIT_S
    points = telemetry.points(metric)
    while sum(p.count for _, p in points) < number and time.monotonic() < deadline:
        time.sleep(0.05)
        points = telemetry.points(metric)
    return points


@pytest.mark.parametrize(("flavour", "mode", "client"), _cases())
def test_http_session_is_exact_on_both_sides(
    flavour: str, mode: str, client: str, servers: HttpServers
) -> None:
    transport, era, app = MODES[mode]
    port = servers.ports[(flavour, app)]
    sampled = mode != "stateless"  # no back-channel on handshake-era stateless HTTP
    with instrumented() as telemetry:
        target = Target(flavour, transport, base_url=servers.url(flavour, app))
        session = anyio.run(
            lambda: run_session(target, client=client, era=era, skip=() if sampled else ("sample",))
        )
        spans = telemetry.spans()
        server_name = payloads.SERVER_NAMES[flavour]
        assert session.server_name == server_name

        network = {
            "network.transport": "tcp",
            "network.protocol.name": "http",
            "server.address": "127.0.0.1",
            "server.port": port,
        }
        pairs = check_client_spans(spans, session, jsonrpc=True, network=network)
        check_server_spans(
            spans,
            pairs,
            network_keys=("network.transport", "network.protocol.name", "client.address", "client.port"),
        )
        if sampled:
            check_sampling_spans(spans, session, server_side=era == "legacy")
        # The server span's parent is the client's span (from `_meta`); the HTTP request's
        # span, current when the request arrived, is linked.
        ambient = {s.context.span_id for s in spans if s.name == AMBIENT_SPAN}
        for _, client_span in pairs if flavour != "fastmcp" else ():
            (server_span,) = [
                s
                for s in spans
                if s.kind is SpanKind.SERVER
                and s.parent
                and s.parent.span_id == client_span.context.span_id
                and s.name != "sampling/createMessage"  # the client's own answer, not the server's
            ]
            assert [link.context.span_id in ambient for link in server_span.links] == [True]

        has_session = mode in ("sse", "stateful")
        check_side_metrics(
            telemetry, "client", expected_exchanges(session, era, sampled), server_name, budgeted=True
        )
        check_side_metrics(
            telemetry,
            "server",
            expected_exchanges(session, era, sampled and era == "legacy"),
            server_name,
            budgeted=has_session,
        )
        check_durations(
            telemetry, "mcp.client.operation.duration", session.exchanges, session.protocol_version
        )
        check_durations(
            telemetry, "mcp.server.operation.duration", session.exchanges, session.protocol_version
        )

        client_sessions = telemetry.points("mcp.client.session.duration")
        assert sum(p.count for _, p in client_sessions) == (1 if era == "legacy" else 0)
        server_sessions = _wait_for_points(telemetry, "mcp.server.session.duration", 1 if has_session else 0)
        assert sum(p.count for _, p in server_sessions) == (1 if has_session else 0)
        for attributes, _ in client_sessions + server_sessions:
            assert attributes["mcp.protocol.version"] == session.protocol_version
            assert attributes["network.protocol.name"] == "http"

        if mode == "stateful":  # the transport session is the server's budget scope
            scopes = {
                (s.attributes or {}).get("mcp_tokens.budget.scope")
                for s in spans
                if s.kind is SpanKind.SERVER and "mcp_tokens.budget.used" in (s.attributes or {})
            }
            assert len(scopes) == 1 and None not in scopes
        synthetic = [
            s
            for s in spans
            if s.kind is SpanKind.SERVER
            and s.name == "tools/list"
            and "mcp_tokens.response" not in (s.attributes or {})
        ]
        # 2026-07-28 HTTP validates Mcp-Param headers with an internal tools/list (no
        # get_tool_input_schema: the low-level Server and fastmcp); it is not a listing.
        runs_synthetic = era == "modern" and flavour != "sdk_fastmcp"
        assert bool(synthetic) is runs_synthetic
        assert set(telemetry.ends.ends.values()) == {1}
