# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x: the instrumentation never hurts the host.

- every exception of theirs (MCPError, pydantic ValidationError, handler errors, timeouts,
  cancellations) reaches the caller unchanged, the very same object;
- a failure of ours (bookkeeping, the pipeline, the worker queue) never reaches the caller,
  and every span is still ended exactly once;
- `uninstrument()` restores every patched attribute by identity; a missing patch point
  makes `patch()` raise and `instrument()` leave MCP untouched;
- label values stay bounded (300 unknown tool names fold into `_OTHER`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, worker
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.trace import NoOpTracer, SpanKind, StatusCode

from tests.integration.apps import payloads
from tests.integration.apps._line import IS_MCP2
from tests.integration.apps.client import Target
from tests.integration.apps.lowlevel_server import build_server
from tests.integration.v2_support import Telemetry, instrumented, run_session

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(120),
]

if IS_MCP2:
    import mcp.client.client
    import mcp.client.session
    import mcp.client.sse
    import mcp.client.stdio
    import mcp.client.streamable_http
    import mcp.server._otel
    import mcp.server._streamable_http_modern
    import mcp.server.connection
    import mcp.server.mcpserver.server
    import mcp.server.runner
    import mcp.server.stdio
    import mcp.shared.direct_dispatcher
    import mcp.shared.jsonrpc_dispatcher
    import mcp_types as types
    from mcp import Client
    from mcp.server import Server
    from mcp.shared.exceptions import MCPError
    from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
    from opentelemetry.instrumentation.mcp_tokens.patches import (
        v2_client_call,
        v2_server,
        v2_server_call,
    )
    from opentelemetry.instrumentation.mcp_tokens.patches.mcp_v2 import McpV2Patcher
    from pydantic import ValidationError

Handler = Callable[[Any, Any], Awaitable[Any]]
TIMEOUT_CODE = -32001
SDK_END_WARNING = "Calling end() on an ended span"


def tool_server(call_tool: Handler, middleware: list[Any] | None = None) -> Any:
    """A low-level server with one tool, `act`, served by `call_tool`."""

    async def list_tools(ctx: Any, params: Any) -> Any:
        schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
        return types.ListToolsResult(tools=[types.Tool(name="act", input_schema=schema)])

    server = Server("safety", on_list_tools=list_tools, on_call_tool=call_tool)
    if middleware:
        server.middleware = [*middleware, *server.middleware]  # outside the SDK's span
    return server


class SeenExceptions:
    """A user middleware, outermost in the chain: what left the chain below it."""

    def __init__(self) -> None:
        self.seen: list[BaseException] = []

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        try:
            return await call_next(ctx)
        except BaseException as exc:
            self.seen.append(exc)
            raise


async def call_act(server: Any, mode: str, **client_options: Any) -> Any:
    """Call `act`; an exception is returned, not raised (inside the client's task group)."""
    async with Client(server, mode=mode, **client_options) as client:
        try:
            return await client.call_tool("act", {"x": 1})
        except Exception as exc:
            return exc


def spans_ended_once(telemetry: Telemetry, caplog: pytest.LogCaptureFixture) -> None:
    spans = telemetry.spans()
    assert spans and len(telemetry.ends.ends) == len(spans)
    assert set(telemetry.ends.ends.values()) == {1}
    assert not [r for r in caplog.records if SDK_END_WARNING in r.getMessage()]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_a_servers_mcp_error_reaches_the_caller_as_the_same_object(mode: str) -> None:
    error = MCPError(-32050, "the very same error")

    async def call_tool(ctx: Any, params: Any) -> Any:
        raise error

    seen = SeenExceptions()
    with instrumented() as telemetry:
        raised = anyio.run(call_act, tool_server(call_tool, [seen]), mode)
        # In process (auto: DirectDispatcher) the object crosses both sides' wrappers.
        assert isinstance(raised, MCPError) and raised.code == -32050
        if mode == "auto":
            assert raised is error
        assert seen.seen == [error] and seen.seen[0] is error
        spans = telemetry.spans()
        for kind in (SpanKind.CLIENT, SpanKind.SERVER):
            (span,) = [s for s in spans if s.kind is kind and s.name == "tools/call act"]
            assert span.attributes["error.type"] == "-32050"
            assert span.status.status_code is StatusCode.ERROR


def test_handler_exceptions_pass_our_server_wrappers_unchanged() -> None:
    failure = ValueError("handler bug")
    invalid = ValidationError.from_exception_data("Params", [])
    raised_by_handler: list[BaseException] = [failure, invalid]

    async def call_tool(ctx: Any, params: Any) -> Any:
        raise raised_by_handler.pop(0)

    seen = SeenExceptions()
    with instrumented() as telemetry:
        server = tool_server(call_tool, [seen])
        for code in (0, -32602):  # what the SDK writes for an unmapped error, and for invalid params
            raised = anyio.run(call_act, server, "legacy")
            assert isinstance(raised, MCPError) and raised.code == code
        assert seen.seen[0] is failure and seen.seen[1] is invalid
        server_errors = [
            (s.attributes or {}).get("error.type")
            for s in telemetry.spans()
            if s.kind is SpanKind.SERVER and s.name == "tools/call act"
        ]
        assert server_errors == ["ValueError", "-32602"]


def test_timeouts_and_cancellations_reach_the_caller_unchanged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    raised_inside: list[BaseException] = []
    original = JSONRPCDispatcher.send_raw_request

    async def spy(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except BaseException as exc:
            raised_inside.append(exc)
            raise

    monkeypatch.setattr(JSONRPCDispatcher, "send_raw_request", spy)  # below our wrapper

    async def call_tool(ctx: Any, params: Any) -> Any:
        await anyio.sleep(30)
        raise AssertionError("not reached")

    async def cancelled_call() -> bool:
        with anyio.move_on_after(0.3) as scope:
            await call_act(tool_server(call_tool), "legacy")
        return scope.cancelled_caught

    caplog.set_level(logging.WARNING)
    with instrumented() as telemetry:
        raised = anyio.run(lambda: call_act(tool_server(call_tool), "legacy", read_timeout_seconds=0.3))
        assert isinstance(raised, MCPError) and raised.code == TIMEOUT_CODE
        assert raised_inside[-1] is raised
        assert anyio.run(cancelled_call) is True
        assert type(raised_inside[-1]).__name__ == "CancelledError"
        client_spans = [
            s for s in telemetry.spans() if s.kind is SpanKind.CLIENT and s.name == "tools/call act"
        ]
        assert [s.attributes.get("error.type") for s in client_spans] == [str(TIMEOUT_CODE), "cancelled"]
        # Both abandoned calls send the server a courtesy cancel: its handler is cancelled.
        server_spans = [
            s for s in telemetry.spans() if s.kind is SpanKind.SERVER and s.name == "tools/call act"
        ]
        assert [s.attributes.get("error.type") for s in server_spans] == ["cancelled", "cancelled"]
        spans_ended_once(telemetry, caplog)


def _bookkeeping_failure(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("a bug in mcp-tokens")


@pytest.mark.parametrize(
    "breaks",
    [
        "client_close",
        "client_span_annotation",
        "server_enrich",
        "server_span_annotation",
        "server_begin",
        "annotate_span",
        "pipeline_submit",
        "worker_queue",
    ],
)
def test_our_failures_never_reach_the_caller_and_spans_end_once(
    breaks: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with instrumented() as telemetry:
        targets = {
            "client_close": (v2_client_call.Reporter, "close"),
            "client_span_annotation": (v2_client_call, "_annotate"),  # on the worker's thread
            "server_enrich": (v2_server_call.ServerCall, "_enrich"),
            "server_span_annotation": (v2_server_call, "annotate_server_span"),  # likewise
            "server_begin": (v2_server.ServerHooks, "_transport"),
            "annotate_span": (telemetry.pipeline.recorder, "annotate_span"),
            "pipeline_submit": (telemetry.pipeline, "submit"),
            "worker_queue": (worker, "payload_chars"),
        }
        owner, name = targets[breaks]
        monkeypatch.setattr(owner, name, _bookkeeping_failure)
        for era in ("legacy", "modern"):
            session = anyio.run(lambda era=era: run_session(Target("lowlevel", "memory"), era=era))
            assert len(session.exchanges) == (14 if era == "legacy" else 15)  # modern samples in 2 rounds
            assert next(c.error for c in session.exchanges if c.error is not None).code == -32032
        spans_ended_once(telemetry, caplog)
        if breaks == "annotate_span":
            skipped = telemetry.points("mcp_tokens.analysis.skipped")
            assert {a["mcp_tokens.skip.reason"] for a, _ in skipped} == {"analysis_error"}


def _patch_points() -> list[tuple[Any, str]]:
    session = mcp.client.session.ClientSession
    return [
        (mcp.shared.jsonrpc_dispatcher.JSONRPCDispatcher, "send_raw_request"),
        (mcp.shared.direct_dispatcher.DirectDispatcher, "send_raw_request"),
        (session, "__init__"),
        (session, "__aenter__"),
        (session, "__aexit__"),
        (session, "_on_request"),
        (session, "dispatch_input_request"),
        (mcp.server.runner.ServerRunner, "_compose_server_middleware"),
        (mcp.shared.jsonrpc_dispatcher, "otel_span"),
        (mcp.server._otel, "otel_span"),
        (mcp.server._streamable_http_modern, "_tool_input_schema"),
        (mcp.server.connection.Connection, "for_loop"),
        (mcp.server.runner, "aclose_shielded"),
        (mcp.client.stdio, "stdio_client"),
        (mcp.client.client, "stdio_client"),
        (mcp.client.client, "streamable_http_client"),
        (mcp.client.streamable_http, "streamable_http_client"),
        (mcp.client.sse, "sse_client"),
        (mcp.server.stdio, "stdio_server"),
        (mcp.server.mcpserver.server, "stdio_server"),
    ]


def test_uninstrument_restores_every_patched_attribute_by_identity() -> None:
    points = _patch_points()
    before = [vars(owner)[name] for owner, name in points]
    with instrumented():
        during = [vars(owner)[name] for owner, name in points]
        unchanged = [
            f"{o.__name__}.{n}" for (o, n), a, b in zip(points, before, during, strict=True) if a is b
        ]
        assert unchanged == []
    after = [vars(owner)[name] for owner, name in points]
    assert all(a is b for a, b in zip(before, after, strict=True))


def test_a_missing_patch_point_leaves_mcp_untouched(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    points = _patch_points()
    monkeypatch.delattr(mcp.server.runner.ServerRunner, "_compose_server_middleware")
    points = [(o, n) for o, n in points if n != "_compose_server_middleware"]
    before = [vars(owner)[name] for owner, name in points]

    pipeline = Pipeline(Settings(), MeterProvider().get_meter("test"))
    with pytest.raises(AttributeError, match=r"ServerRunner\._compose_server_middleware"):
        McpV2Patcher(pipeline, NoOpTracer()).patch()
    assert all(vars(o)[n] is b for (o, n), b in zip(points, before, strict=True))

    caplog.set_level(logging.WARNING)
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument()
    try:
        assert instrumentor.pipeline is None
        assert all(vars(o)[n] is b for (o, n), b in zip(points, before, strict=True))
        warnings = [r for r in caplog.records if "mcp-tokens could not instrument MCP" in r.getMessage()]
        assert len(warnings) == 1
    finally:
        instrumentor.uninstrument()


def test_unknown_tool_names_fold_into_other() -> None:
    names = [f"made-up-{i}" for i in range(300)]

    async def session() -> None:
        async with Client(build_server()) as client:  # in process, 2026-07-28 (DirectDispatcher)
            await client.list_tools()
            for name in names:
                with pytest.raises(MCPError):
                    await client.call_tool(name, {})
            await client.call_tool("echo", {"text": "known"})

    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # 300 server-side tracebacks otherwise
    try:
        with instrumented() as telemetry:
            anyio.run(session)
            for metric in (
                "mcp_tokens.payload",
                "mcp.client.operation.duration",
                "mcp.server.operation.duration",
            ):
                labels = [
                    (a.get("gen_ai.tool.name"), getattr(p, "count", None))
                    for a, p in telemetry.points(metric)
                    if a.get("mcp.method.name") == "tools/call"
                ]
                values = {value for value, _ in labels}
                assert values <= {"_OTHER", "echo"}, metric
                assert sum(c for v, c in labels if v == "_OTHER") == (
                    600 if metric == "mcp_tokens.payload" else 300
                )
            spans = telemetry.spans()
            raw = {s.attributes.get("gen_ai.tool.name") for s in spans if s.kind is SpanKind.CLIENT}
            assert set(names) <= raw  # spans keep the name; only metric labels are bounded
            assert payloads.TOOL_NAMES[0] == "echo"
    finally:
        logging.getLogger("mcp").setLevel(logging.NOTSET)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_counting_is_off_the_response_path_and_spans_end_when_the_response_completed(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    returned = threading.Event()
    after_the_call: list[bool] = []

    async def call() -> int:
        async with Client(build_server(), mode=mode) as client:
            await client.call_tool("echo", {"text": "timing"})
            returned_ns = time.time_ns()
            returned.set()
            return returned_ns

    with instrumented() as telemetry:
        recorder = telemetry.pipeline.recorder
        record = recorder.record_findings

        def record_after_the_call(*args: Any) -> Any:
            # Were recording on the call's path, the call could not return, and this would
            # wait out its timeout instead.
            after_the_call.append(returned.wait(30))
            return record(*args)

        monkeypatch.setattr(recorder, "record_findings", record_after_the_call)
        returned_ns = anyio.run(call)
        spans = [s for s in telemetry.spans() if s.name == "tools/call echo"]
        assert sorted(s.kind.name for s in spans) == ["CLIENT", "SERVER"]
        for span in spans:
            assert span.end_time is not None and span.end_time <= returned_ns
            assert span.attributes["mcp_tokens.response"] > 0  # annotated before it ended
        assert after_the_call and all(after_the_call)
