# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Shared machinery of the mcp 2.x instrumentation tests (`test_v2_*.py`).

- `instrumented(...)`: `McpTokensInstrumentor().instrument(...)` with in-memory span and
  metric exporters; SDK and fastmcp spans go to the same (global) tracer provider.
- `Expected`: the token counts a test expects, computed here with tiktoken's Encoding from
  `load_bundled_encoding("o200k_base")` and the rules of `engine/blocks.py`, on the wire
  JSON the client actually received (recorded by a proxy around the session's dispatcher,
  independent of the instrumentation's own hooks).
- `HttpServers`: the test servers' ASGI apps served by uvicorn in one background thread, so
  the server side is instrumented in this process too.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import importlib
import json
import math
import struct
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Protocol

import uvicorn
from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
from opentelemetry.instrumentation.mcp_tokens.engine.content import classify
from opentelemetry.instrumentation.mcp_tokens.engine.padding import detect_padding
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.integration.apps import harness, payloads
from tests.integration.apps._serve import HOST
from tests.integration.apps.client import connect
from tests.metric_points import points_of
from tests.structure_expected import structure_tokens

ENCODING = load_bundled_encoding("o200k_base")
OUR_SCOPE = "opentelemetry.instrumentation.mcp_tokens"
SDK_SCOPE = "mcp-python-sdk"
FASTMCP_SCOPE = "fastmcp"
MODERN_VERSION = "2026-07-28"
CALL_METHODS = ("tools/list", "tools/call", "resources/read", "prompts/get")
BUDGETED = frozenset(CALL_METHODS)
DRAIN_S = 20.0


# --- telemetry ------------------------------------------------------------------------------
class MetricSource(Protocol):
    """Where metric points come from: this process (`Telemetry`) or a dump (`DumpedTelemetry`)."""

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]: ...


class EndCounter(SpanProcessor):
    """Counts `on_end` per span: every span must be ended exactly once."""

    def __init__(self) -> None:
        self.ends: Counter[int] = Counter()
        self._lock = threading.Lock()

    def on_end(self, span: ReadableSpan) -> None:
        with self._lock:
            self.ends[span.context.span_id] += 1

    def clear(self) -> None:
        with self._lock:
            self.ends.clear()


_GLOBAL: tuple[TracerProvider, InMemorySpanExporter, EndCounter] | None = None


def global_tracing() -> tuple[TracerProvider, InMemorySpanExporter, EndCounter]:
    """The process's SDK tracer provider (the MCP SDK and fastmcp use the global one)."""
    global _GLOBAL
    if _GLOBAL is None:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        assert isinstance(provider, TracerProvider), "another non-SDK global tracer provider is set"
        exporter, counter = InMemorySpanExporter(), EndCounter()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        provider.add_span_processor(counter)
        _GLOBAL = provider, exporter, counter
    return _GLOBAL


@dataclass
class Telemetry:
    instrumentor: McpTokensInstrumentor
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    ends: EndCounter

    @property
    def pipeline(self) -> Any:
        return self.instrumentor.pipeline

    def flush(self) -> None:
        assert self.pipeline.force_flush(DRAIN_S), "the analysis worker did not drain"

    def spans(self) -> list[ReadableSpan]:
        self.flush()
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, data point) of every point of metric `name` (cumulative)."""
        self.flush()
        return points_of(self.reader, name)


@contextlib.contextmanager
def instrumented(**settings: Any) -> Iterator[Telemetry]:
    provider, exporter, counter = global_tracing()
    exporter.clear()
    counter.clear()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=meter_provider, **settings)
    assert instrumentor.pipeline is not None, "instrument() did not start (see the log)"
    try:
        yield Telemetry(instrumentor, exporter, reader, counter)
    finally:
        instrumentor.uninstrument()
        meter_provider.shutdown()


def select(points: Sequence[tuple[dict[str, Any], Any]], **wanted: Any) -> list[tuple[dict[str, Any], Any]]:
    """Points whose attributes include `wanted` (keys with dots spelled with `__`)."""
    pairs = {key.replace("__", "."): value for key, value in wanted.items()}
    return [(a, p) for a, p in points if all(a.get(k) == v for k, v in pairs.items())]


# --- the expected counts: blocks.py rules, applied with tiktoken here -----------------------
def count(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def png_size(data_b64: str) -> tuple[int, int]:
    raw = base64.b64decode(data_b64)
    width, height = struct.unpack(">II", raw[16:24])
    return width, height


def image_tokens(data_b64: str) -> int:
    width, height = png_size(data_b64)  # Anthropic's rule; 32x24 is far below the resize caps
    return math.ceil(width * height / 750)


def block_tokens(block: Mapping[str, Any]) -> int:
    kind = block.get("type")
    if kind == "text":
        return count(block["text"])
    if kind == "image":
        return image_tokens(block["data"])
    if kind == "resource":
        return count(block["resource"]["text"])
    return count(compact(block))


def _blocks(content: object) -> list[Mapping[str, Any]]:
    return [content] if isinstance(content, Mapping) else list(content or [])  # type: ignore[call-overload]


def tool_result_tokens(result: Mapping[str, Any]) -> int:
    total = sum(block_tokens(b) for b in _blocks(result.get("content")))
    if result.get("structuredContent") is not None:
        total += count(compact(result["structuredContent"]))
    return total


TOOL_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def tool_definitions(result: Mapping[str, Any]) -> dict[str, int]:
    return {
        tool["name"]: count(compact({k: v for k, v in tool.items() if k in TOOL_FIELDS}))
        for tool in result.get("tools", [])
    }


def response_tokens(method: str, result: Mapping[str, Any] | None) -> int | None:
    if result is None:
        return None
    if method == "tools/call":
        return tool_result_tokens(result)
    if method == "tools/list":
        return sum(tool_definitions(result).values())
    if method == "resources/read":
        return sum(count(c["text"]) for c in result.get("contents", []))
    if method == "prompts/get":
        return sum(block_tokens(b) for m in result.get("messages", []) for b in _blocks(m.get("content")))
    if method == "sampling/createMessage":
        return sum(block_tokens(b) for b in _blocks(result.get("content")))
    return None


def request_tokens(method: str, params: Mapping[str, Any] | None) -> int | None:
    params = params or {}
    if method == "tools/call":
        return count(compact(params.get("arguments") or {}))
    if method == "sampling/createMessage":
        system = params.get("systemPrompt")
        total = count(system) if system else 0
        return total + sum(
            block_tokens(b) for m in params.get("messages", []) for b in _blocks(m.get("content"))
        )
    return None


def overhead(method: str, result: Mapping[str, Any] | None) -> dict[str, int]:
    """Overhead tokens by kind of a tools/call result (the shapes the test apps return)."""
    if method != "tools/call" or result is None:
        return {}
    kinds: dict[str, int] = defaultdict(int)
    parsed: list[object] = []
    for block in _blocks(result.get("content")):
        text = block.get("text") if block.get("type") == "text" else None
        if not isinstance(text, str) or text[:1] not in "[{":
            continue
        value = json.loads(text)
        parsed.append(value)
        if compact(value) != text:
            kinds["formatting"] += count(text) - count(compact(value))
        kinds["structure"] += structure_tokens(value, count(text), count)
    structured = result.get("structuredContent")
    if structured is not None and any(value == structured for value in parsed):
        kinds["duplicate"] += count(compact(structured))
    elif structured is not None:
        kinds["structure"] += structure_tokens(structured, count(compact(structured)), count)
    return {kind: tokens for kind, tokens in kinds.items() if tokens}


def _texts(method: str, payload: Mapping[str, Any] | None, *, request: bool) -> list[str]:
    """The texts of a payload's blocks that padding detection reads (no media, no duplicates)."""
    if payload is None:
        return []
    if request:
        if method == "tools/call":
            return [compact(payload.get("arguments") or {})]
        if method == "sampling/createMessage":
            system = [payload["systemPrompt"]] if payload.get("systemPrompt") else []
            return system + [
                b["text"] for m in payload.get("messages", []) for b in _blocks(m.get("content"))
            ]
        return []
    if method == "tools/call":
        texts = [b["text"] for b in _blocks(payload.get("content")) if b.get("type") == "text"]
        structured = payload.get("structuredContent")
        if structured is not None and "duplicate" not in overhead(method, payload):
            texts.append(compact(structured))
        return texts
    if method == "resources/read":
        return [c["text"] for c in payload.get("contents", [])]
    if method == "prompts/get":
        return [b["text"] for m in payload.get("messages", []) for b in _blocks(m.get("content"))]
    if method == "sampling/createMessage":
        return [b["text"] for b in _blocks(payload.get("content")) if b.get("type") == "text"]
    return []


def padding_reasons(
    method: str, params: Mapping[str, Any] | None, result: Mapping[str, Any] | None
) -> list[str]:
    """Padding findings (one per reason per block) of an exchange's request and response."""
    reasons: list[str] = []
    for text in _texts(method, params, request=True) + _texts(method, result, request=False):
        findings = detect_padding(text, tokens=count(text), content_type=classify(text))
        reasons += [finding.reason.value for finding in findings]
    return reasons


def risk(tokens: int) -> str:
    return RiskThresholds().classify(tokens).value


# --- what the client saw on the wire --------------------------------------------------------
@dataclass
class Call:
    method: str
    params: dict[str, Any] | None
    result: dict[str, Any] | None = None
    error: BaseException | None = None

    @property
    def target(self) -> str | None:
        name = (self.params or {}).get("name")
        return name if self.method in ("tools/call", "prompts/get") else None

    @property
    def error_type(self) -> str | None:
        if self.error is not None:
            code = getattr(self.error, "code", None)
            return str(code) if isinstance(code, int) else type(self.error).__qualname__
        if self.method == "tools/call" and (self.result or {}).get("isError") is True:
            return "tool_error"
        return None

    @property
    def span_name(self) -> str:
        return f"{self.method} {self.target}" if self.target else self.method


class RecordingDispatcher:
    """Stands in for a session's dispatcher and keeps every raw request and result."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[Call] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def send_raw_request(self, method: str, params: Any, opts: Any = None, **kwargs: Any) -> Any:
        call = Call(method, dict(params) if params else None)
        self.calls.append(call)
        try:
            call.result = await self._inner.send_raw_request(method, params, opts, **kwargs)
        except BaseException as exc:
            call.error = exc
            raise
        return call.result


def record(driver: Any) -> RecordingDispatcher:
    session = driver.client.session
    proxy = RecordingDispatcher(session._dispatcher)
    session._dispatcher = proxy
    return proxy


@dataclass
class Session:
    server_name: str | None
    protocol_version: str | None
    calls: list[Call] = field(default_factory=list)
    since_ns: int = 0  # when recording started (after the handshake)

    @property
    def exchanges(self) -> list[Call]:
        return [c for c in self.calls if c.method in CALL_METHODS]


async def run_session(
    target: Any, *, client: str = "sdk", era: str = "legacy", skip: Sequence[str] = ()
) -> Session:
    """The standard session (list, every tool, both resources, the prompt), wire recorded."""
    async with connect(target, client=client, era=era) as driver:
        since_ns = time.time_ns()
        proxy = record(driver)
        await driver.list_tools()
        for name, arguments in payloads.STANDARD_CALLS:
            if name not in skip:
                await driver.call_tool(name, arguments)
        for uri in payloads.RESOURCES:
            await driver.read_resource(uri)
        await driver.get_prompt(payloads.PROMPT_NAME, {"code": "x = 1"})
    return Session(driver.server_name, driver.protocol_version, proxy.calls, since_ns)


# --- servers in this process ----------------------------------------------------------------
class HttpServers:
    """The test apps on HTTP transports, served by uvicorn in one background thread."""

    def __init__(self, specs: Sequence[tuple[str, str]]) -> None:
        self.ports: dict[tuple[str, str], int] = {}
        self._servers: list[uvicorn.Server] = []
        for flavour, transport in specs:
            port = harness.free_port()
            app = _build_app(flavour).http_app(transport)
            if flavour != "fastmcp":
                # fastmcp 4 parents its span on a current HTTP span rather than on `_meta`
                # (its policy), which would split client and server into two traces here.
                app = AmbientHttpSpan(app)
            config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on")
            self._servers.append(uvicorn.Server(config))
            self.ports[(flavour, transport)] = port
        self._thread = threading.Thread(target=self._run, name="v2-http-servers", daemon=True)

    def url(self, flavour: str, transport: str) -> str:
        return f"http://{HOST}:{self.ports[(flavour, transport)]}"

    def __enter__(self) -> HttpServers:
        self._thread.start()
        for port in self.ports.values():
            harness.wait_for_port(port, 30.0)
        return self

    def __exit__(self, *exc: object) -> None:
        for server in self._servers:
            server.should_exit = True
        self._thread.join(15.0)

    def _run(self) -> None:
        async def serve_all() -> None:
            await asyncio.gather(*(server.serve() for server in self._servers))

        asyncio.run(serve_all())


AMBIENT_SPAN = "HTTP request"


class AmbientHttpSpan:
    """ASGI middleware standing in for an HTTP server instrumentation: a SERVER span per
    HTTP request, current while the MCP server handles it (the transport context)."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._tracer = trace.get_tracer("tests.ambient-http")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self._app(scope, receive, send)
            return
        with self._tracer.start_as_current_span(AMBIENT_SPAN, kind=SpanKind.SERVER):
            await self._app(scope, receive, send)


def _build_app(flavour: str) -> Any:
    return importlib.import_module(harness.server_module(flavour)).build_app()


# --- telemetry another process dumped (see v2_stdio_server.py) ------------------------------
@dataclass
class DumpedTelemetry:
    """`Telemetry.points` over the metrics a server process dumped as JSON."""

    metrics: Mapping[str, Any]

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        found: list[tuple[dict[str, Any], Any]] = []
        for resource in self.metrics.get("resource_metrics", []):
            for scope in resource.get("scope_metrics", []):
                for metric in scope.get("metrics", []):
                    if metric["name"] == name:
                        for point in metric["data"]["data_points"]:
                            found.append((dict(point.get("attributes") or {}), SimpleNamespace(**point)))
        return found


def dumped_span(record: Mapping[str, Any]) -> Any:
    """A span another process recorded, with the attributes of `ReadableSpan` the checks read."""
    parent = record["parent_span_id"]
    return SimpleNamespace(
        name=record["name"],
        kind=SpanKind[record["kind"]],
        instrumentation_scope=SimpleNamespace(name=record["scope"]),
        context=SimpleNamespace(trace_id=record["trace_id"], span_id=record["span_id"]),
        parent=SimpleNamespace(span_id=parent) if parent is not None else None,
        attributes=record["attributes"],
        status=SimpleNamespace(status_code=StatusCode[record["status"]]),
        start_time=0,
    )


def load_dump(path: Any, timeout_s: float = 15.0) -> tuple[list[Any], DumpedTelemetry]:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"the server process wrote no telemetry to {path}"
        time.sleep(0.05)
    data = json.loads(path.read_text(encoding="utf-8"))
    return [dumped_span(r) for r in data["spans"]], DumpedTelemetry(data["metrics"])
