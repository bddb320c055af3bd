# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x: the instrumentation never hurts the host. Their exceptions reach them as the same
objects (McpError, handler errors, timeouts, cancellations); ours never do; `uninstrument()`
puts every patched attribute back by identity; an mcp it cannot handle is logged and left alone."""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from types import ModuleType
from typing import Any

import anyio
import pytest
from opentelemetry import propagate
from opentelemetry.trace import get_tracer

from tests.integration.apps._line import IS_MCP1, describe

if not IS_MCP1:
    pytest.skip(f"mcp 1.x instrumentation tests; this interpreter has {describe()}", allow_module_level=True)

from mcp import ClientSession, types
from mcp.client import sse
from mcp.client.streamable_http import StreamableHTTPTransport
from mcp.server.lowlevel import Server
from mcp.server.session import ServerSession
from mcp.server.sse import SseServerTransport
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.session import BaseSession, RequestResponder
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, patches
from opentelemetry.instrumentation.mcp_tokens.patches import mcp_v1

from tests.integration._v1_support import SpanRecord, Telemetry, http_server_thread, run_session
from tests.integration.apps import _client_sdk_v1
from tests.integration.apps.client import Target

pytestmark = pytest.mark.timeout(60)

# Modules that re-export a patched function by name (patched too when loaded first).
ALIAS_MODULES = (
    "mcp",
    "mcp.client.session_group",
    "mcp.server.fastmcp.server",
    "fastmcp.client.transports.stdio",
    "fastmcp.client.transports.sse",
    "fastmcp.server.mixins.transport",
    "fastmcp.server.low_level",
)


def patched_owners() -> list[Any]:
    """Every class and module the 1.x patcher may touch."""
    for name in ALIAS_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    # Transport functions are also wrapped in every module that imported them by name (the
    # SDK's re-exports, fastmcp, this test harness): those modules are owners too.
    homes = {
        "stdio_client": "mcp.client.stdio",
        "sse_client": "mcp.client.sse",
        "stdio_server": "mcp.server.stdio",
    }
    originals = {name: vars(importlib.import_module(home))[name] for name, home in homes.items()}
    loaded = {
        id(m): m
        for m in list(sys.modules.values())
        if isinstance(m, ModuleType)
        and any(vars(m).get(name) is original for name, original in originals.items())
    }
    return [
        BaseSession,
        RequestResponder,
        Server,
        ServerSession,
        ClientSession,
        StreamableHTTPTransport,
        SseServerTransport,
        StreamableHTTPServerTransport,
        *loaded.values(),
    ]


def snapshot(owners: list[Any]) -> list[dict[str, Any]]:
    return [dict(vars(owner)) for owner in owners]


def changed(before: list[dict[str, Any]], owners: list[Any]) -> list[str]:
    """Attributes that are not the very object they were, or that appeared or vanished."""
    differences = []
    for old, owner in zip(before, owners, strict=True):
        new = vars(owner)
        for key in set(old) | set(new):
            if old.get(key, KeyError) is not new.get(key, KeyError):
                differences.append(f"{getattr(owner, '__name__', owner)}.{key}")
    return differences


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.close()


# --- a small server whose tools misbehave on purpose ----------------------------------------
EXPLOSION = ValueError("explode: raised by the handler itself")


def misbehaving_server(started: anyio.Event | None = None) -> Server[Any, Any]:
    server: Server[Any, Any] = Server("safety")

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=n, inputSchema={"type": "object"}) for n in ("ok", "slow", "explode")]

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        if request.params.name == "slow":
            if started is not None:
                started.set()
            await anyio.sleep(30)
        if request.params.name == "explode":
            raise EXPLOSION
        return types.ServerResult(types.CallToolResult(content=[types.TextContent(type="text", text="ok")]))

    server.request_handlers[types.CallToolRequest] = call_tool
    return server


@contextlib.asynccontextmanager
async def memory_session(
    server: Server[Any, Any], *, raise_exceptions: bool = False, **session_options: Any
) -> AsyncIterator[ClientSession]:
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as group,
    ):
        group.start_soon(
            lambda: server.run(
                server_streams[0],
                server_streams[1],
                server.create_initialization_options(),
                raise_exceptions=raise_exceptions,
            )
        )
        async with ClientSession(*client_streams, **session_options) as session:
            await session.initialize()
            yield session
        group.cancel_scope.cancel()


def spans_named(telemetry: Telemetry, name: str) -> list[SpanRecord]:
    return [s for s in telemetry.collect()[0] if s.name == name]


# --- uninstrument and unsupported versions ----------------------------------------------------
def test_uninstrument_restores_every_patched_attribute_by_identity() -> None:
    owners = patched_owners()
    before = snapshot(owners)
    telemetry = Telemetry()
    patcher = telemetry.instrumentor._patcher
    assert isinstance(patcher, mcp_v1.McpV1Patcher)
    # Every patch is on one of these owners: the comparison below covers all of them.
    assert len(changed(before, owners)) == patcher.patch_count >= 14
    telemetry.close()
    assert changed(before, owners) == []


def test_a_wrapper_kept_after_uninstrument_passes_straight_through(monkeypatch: pytest.MonkeyPatch) -> None:
    telemetry = Telemetry()
    kept = {name: vars(BaseSession)[name] for name in ("send_request", "_handle_response")}
    kept_respond = vars(RequestResponder)["respond"]
    telemetry.instrumentor.uninstrument()
    # Like a module that imported a wrapped function by name before uninstrument().
    for name, wrapper in kept.items():
        monkeypatch.setattr(BaseSession, name, wrapper)
    monkeypatch.setattr(RequestResponder, "respond", kept_respond)

    async def main() -> None:
        async with memory_session(misbehaving_server()) as session:
            assert (await session.call_tool("ok", {})).content[0].text == "ok"  # type: ignore[union-attr]

    anyio.run(main)
    assert telemetry.exporter.get_finished_spans() == ()
    telemetry.meter_provider.shutdown()


def test_a_stale_wrapper_serves_the_next_instrumentation_once(monkeypatch: pytest.MonkeyPatch) -> None:
    first = Telemetry()
    stale = vars(sse)["sse_client"]  # what `from mcp.client.sse import sse_client` bound meanwhile
    first.close()
    second = Telemetry()
    try:
        # The stale wrapper wraps the original function: it calls the active patcher, so the
        # session gets its network attributes, and nothing is recorded twice.
        monkeypatch.setattr(_client_sdk_v1, "sse_client", stale)
        with http_server_thread("lowlevel", "sse") as base_url:
            run_session(Target("lowlevel", "sse", base_url=base_url), "sdk", {"sample"})
        spans = [s for s in second.collect()[0] if s.name == "tools/call echo"]
        assert [(s.kind, s.attributes["network.transport"]) for s in sorted(spans, key=lambda s: s.kind)] == [
            ("CLIENT", "tcp"),
            ("SERVER", "tcp"),
        ]
        assert first.exporter.get_finished_spans() == ()
    finally:
        second.close()


def test_an_unsupported_mcp_is_logged_once_and_left_alone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    owners = patched_owners()
    before = snapshot(owners)
    monkeypatch.setattr(patches, "installed_mcp_version", lambda: (1, 22))
    instrumentor = McpTokensInstrumentor()
    with caplog.at_level(logging.WARNING):
        instrumentor.instrument()
    try:
        assert instrumentor.pipeline is None
        assert changed(before, owners) == []
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "does not support mcp (1, 22)" in warnings[0].getMessage()
    finally:
        instrumentor.uninstrument()


@pytest.mark.parametrize("version", [(1, 22), (2, 0), None])
def test_the_patcher_refuses_versions_it_cannot_handle(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, int] | None
) -> None:
    monkeypatch.setattr(mcp_v1, "installed_mcp_version", lambda: version)
    patcher = mcp_v1.McpV1Patcher(pipeline=None, tracer=get_tracer(__name__))  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match=r"need mcp >= 1\.2"):
        patcher.patch()
    assert patcher.patch_count == 0


def test_a_patch_that_fails_half_way_is_undone(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(SseServerTransport, "connect_sse")  # a 1.x release without it
    owners = patched_owners()
    before = snapshot(owners)
    instrumentor = McpTokensInstrumentor()
    with caplog.at_level(logging.WARNING):
        instrumentor.instrument()
    try:
        assert instrumentor.pipeline is None
        assert changed(before, owners) == []
        assert any("connect_sse" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
    finally:
        instrumentor.uninstrument()


# --- their exceptions, unchanged --------------------------------------------------------------
class _FailingSendStream:
    """A write stream whose send raises a given exception object."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def send(self, item: Any) -> None:
        raise self.error

    async def aclose(self) -> None:
        return None

    async def __aenter__(self) -> _FailingSendStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        return None


@pytest.mark.parametrize(
    "error",
    [McpError(types.ErrorData(code=-32001, message="peer is gone")), ConnectionResetError("reset by peer")],
    ids=["McpError", "OSError"],
)
def test_a_send_failure_reaches_the_caller_as_the_same_object(telemetry: Telemetry, error: Exception) -> None:
    async def main() -> None:
        receive_send, receive = anyio.create_memory_object_stream[Any](1)
        async with receive_send, ClientSession(receive, _FailingSendStream(error)) as session:  # type: ignore[arg-type]
            with pytest.raises(type(error)) as raised:
                await session.send_ping()
            assert raised.value is error

    anyio.run(main)
    (span,) = spans_named(telemetry, "ping")
    assert span.kind == "CLIENT" and span.status == "ERROR"
    assert span.attributes["error.type"] == (
        "-32001" if isinstance(error, McpError) else "ConnectionResetError"
    )


def test_a_handler_exception_reaches_the_server_as_the_same_object(telemetry: Telemetry) -> None:
    async def main() -> None:
        async with memory_session(misbehaving_server(), raise_exceptions=True) as session:
            await session.call_tool("explode", {})

    with pytest.raises(BaseException) as raised:
        anyio.run(main)
    assert EXPLOSION in leaf_exceptions(raised.value)
    (span,) = [s for s in spans_named(telemetry, "tools/call explode") if s.kind == "SERVER"]
    assert span.attributes["error.type"] == "ValueError" and span.status == "ERROR"


def leaf_exceptions(error: BaseException) -> list[BaseException]:
    inner = getattr(error, "exceptions", None)  # an exception group (3.11+, or the backport)
    if isinstance(inner, tuple | list):
        return [leaf for exception in inner for leaf in leaf_exceptions(exception)]
    return [error]


def test_a_handler_exception_becomes_the_sdk_error_response(telemetry: Telemetry) -> None:
    async def main() -> None:
        async with memory_session(misbehaving_server()) as session:
            with pytest.raises(McpError) as raised:
                await session.call_tool("explode", {})
            assert (raised.value.error.code, raised.value.error.message) == (0, str(EXPLOSION))

    anyio.run(main)
    spans = spans_named(telemetry, "tools/call explode")
    assert {(s.kind, s.attributes["error.type"], s.status) for s in spans} == {
        ("CLIENT", "0", "ERROR"),
        ("SERVER", "0", "ERROR"),
    }


def test_a_timeout_reaches_the_caller(telemetry: Telemetry) -> None:
    async def main() -> None:
        async with memory_session(misbehaving_server()) as session:
            with pytest.raises(McpError) as raised:
                await session.call_tool("slow", {}, read_timeout_seconds=timedelta(seconds=0.2))
            assert raised.value.error.code == 408

    anyio.run(main)
    client = [s for s in spans_named(telemetry, "tools/call slow") if s.kind == "CLIENT"]
    assert [(s.attributes["error.type"], s.status) for s in client] == [("408", "ERROR")]


def test_a_cancelled_call_stays_cancelled(telemetry: Telemetry) -> None:
    async def main() -> None:
        async with memory_session(misbehaving_server()) as session:
            with anyio.move_on_after(0.2) as scope:
                await session.call_tool("slow", {})
            assert scope.cancelled_caught  # the cancellation went through the wrapper
            assert (await session.call_tool("ok", {})).content[0].text == "ok"  # type: ignore[union-attr]

    anyio.run(main)
    (client,) = [s for s in spans_named(telemetry, "tools/call slow") if s.kind == "CLIENT"]
    assert (client.attributes["error.type"], client.status) == ("cancelled", "UNSET")


def test_a_request_the_client_cancels_ends_the_server_span(telemetry: Telemetry) -> None:
    started = anyio.Event()

    async def main() -> None:
        async with memory_session(misbehaving_server(started)) as session:
            outcome: dict[str, BaseException] = {}

            async def call() -> None:
                try:
                    await session.call_tool("slow", {})
                except McpError as error:
                    outcome["error"] = error

            async with anyio.create_task_group() as group:
                group.start_soon(call)
                await started.wait()
                request_id = session._request_id - 1
                await session.send_notification(
                    types.ClientNotification(
                        types.CancelledNotification(
                            params=types.CancelledNotificationParams(requestId=request_id)
                        )
                    )
                )
            assert isinstance(outcome["error"], McpError) and outcome["error"].error.code == 0

    anyio.run(main)
    spans = spans_named(telemetry, "tools/call slow")
    server = [s for s in spans if s.kind == "SERVER"]
    assert [(s.attributes["error.type"], s.status) for s in server] == [("cancelled", "UNSET")]


# --- our failures, never theirs ---------------------------------------------------------------
class _BrokenPropagator:
    @property
    def fields(self) -> set[str]:
        return {"traceparent"}

    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        raise RuntimeError("broken propagator")

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        raise RuntimeError("broken propagator")


def test_failures_inside_the_instrumentation_never_reach_the_caller(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = telemetry.instrumentor.pipeline

    def broken_submit(exchange: Any) -> None:
        raise RuntimeError("broken pipeline")

    monkeypatch.setattr(pipeline, "submit", broken_submit)
    monkeypatch.setattr(propagate, "_HTTP_TEXT_FORMAT", _BrokenPropagator())
    report = run_session(Target("lowlevel", "memory"), "sdk", ())
    assert report.calls["echo"].text == "hello, tokens"
    assert report.calls["boom"].error_code is not None
    assert report.prompt_text is not None


def test_hostile_meta_from_a_peer_is_ignored(telemetry: Telemetry) -> None:
    async def main() -> None:
        async with memory_session(misbehaving_server()) as session:
            meta = {"baggage": "mcp_tokens.budget.scope=%ZZ;;,,=", "tracestate": "\udcff" * 3, "x": 7}
            result = await session.call_tool("ok", {}, meta=meta)
            assert result.content[0].text == "ok"  # type: ignore[union-attr]

    anyio.run(main)
    (server,) = [s for s in spans_named(telemetry, "tools/call ok") if s.kind == "SERVER"]
    assert server.attributes["mcp_tokens.response"] == 1
