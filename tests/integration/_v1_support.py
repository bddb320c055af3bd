# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Shared machinery of the mcp 1.x instrumentation tests (`test_v1_*.py`).

- `Telemetry`: `McpTokensInstrumentor().instrument()` with the SDK's in-memory span exporter
  and a DELTA-temporality in-memory metric reader, so each run reads only its own points.
- `run_case`: one standard session of H6's harness for (flavour, transport, client kind). HTTP
  servers run in this process (uvicorn in a thread, so client and server spans land in one
  exporter and one trace can be checked over real TCP); a stdio server runs as a subprocess
  whose `sitecustomize` instruments it (`_v1_probe`) and writes its spans and metrics to JSON.
- `Expected`: exact token counts from tiktoken's o200k_base `Encoding`
  (`engine.tokenizer.load_bundled_encoding`) applied to the block rules of `engine/blocks.py`
  (docs/telemetry.md) on the payloads the test apps return.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import json
import math
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider, ObservableCounter, UpDownCounter
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.integration.apps import harness, payloads
from tests.integration.apps.client import SessionReport, Target, run_standard_session
from tests.structure_expected import structure_tokens

PROBE_ENV = "MCP_TOKENS_V1_PROBE_OUT"
SESSION_TIMEOUT_S = 45.0
DRAIN_TIMEOUT_S = 30.0
PROBE_TIMEOUT_S = 15.0
TRANSPORTS = ("memory", "stdio", "sse", "streamable-http", "stateless-http")


# --- recorded telemetry, the same shape in this process and from a probed subprocess ---------
@dataclass(frozen=True)
class SpanRecord:
    name: str
    kind: str  # "CLIENT" / "SERVER"
    trace_id: int
    span_id: int
    parent_id: int | None
    attributes: dict[str, Any]
    status: str  # "UNSET" / "ERROR" / "OK"
    events: tuple[tuple[str, dict[str, Any]], ...] = ()
    links: tuple[int, ...] = ()


@dataclass(frozen=True)
class Point:
    metric: str
    attributes: dict[str, Any]
    value: float  # counter sum, histogram sum, gauge value
    count: int = 0  # histogram count


def span_record(span: ReadableSpan) -> SpanRecord:
    context = span.context
    assert context is not None
    return SpanRecord(
        name=span.name,
        kind=span.kind.name,
        trace_id=context.trace_id,
        span_id=context.span_id,
        parent_id=span.parent.span_id if span.parent is not None else None,
        attributes=dict(span.attributes or {}),
        status=span.status.status_code.name,
        events=tuple((event.name, dict(event.attributes or {})) for event in span.events),
        links=tuple(link.context.span_id for link in span.links),
    )


def metric_points(reader: InMemoryMetricReader) -> list[Point]:
    points: list[Point] = []
    data = reader.get_metrics_data()
    if data is None:
        return points
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if hasattr(point, "bucket_counts"):
                        points.append(Point(metric.name, attributes, float(point.sum), int(point.count)))
                    elif point.value or not isinstance(metric.data, Sum):
                        # Counters are observable: a delta reader also gets a 0 for every
                        # series an earlier run created. Only this run's counts matter here.
                        points.append(Point(metric.name, attributes, float(point.value)))
    return points


_DELTA = {
    Counter: AggregationTemporality.DELTA,
    ObservableCounter: AggregationTemporality.DELTA,
    UpDownCounter: AggregationTemporality.CUMULATIVE,
    Histogram: AggregationTemporality.DELTA,
}


class Telemetry:
    """An instrumented process: in-memory spans, delta metrics, the running pipeline."""

    def __init__(self, *, cumulative: bool = False, **settings: Any) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader(preferred_temporality=None if cumulative else _DELTA)  # type: ignore[arg-type]
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.instrumentor = McpTokensInstrumentor()
        self.instrumentor.instrument(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **settings
        )
        if self.instrumentor.pipeline is None:
            raise RuntimeError("McpTokensInstrumentor did not start: is mcp 1.x installed?")
        # The client drivers import transport functions by name: have them bind the wrapped
        # ones, as an application started under opentelemetry-instrument would.
        for module in ("_client_sdk_v1", "_client_fastmcp"):
            with contextlib.suppress(ImportError):
                importlib.import_module(f"tests.integration.apps.{module}")

    def reset(self) -> None:
        self.settle()
        self.exporter.clear()
        metric_points(self.reader)  # consume the points recorded so far

    def settle(self) -> None:
        pipeline = self.instrumentor.pipeline
        assert pipeline is not None and pipeline.force_flush(DRAIN_TIMEOUT_S), "analysis did not finish"

    def collect(self) -> tuple[list[SpanRecord], list[Point]]:
        self.settle()
        spans = [span_record(span) for span in self.exporter.get_finished_spans()]
        return spans, metric_points(self.reader)

    def close(self) -> None:
        self.instrumentor.uninstrument()
        self.meter_provider.shutdown()


# --- running the harness ------------------------------------------------------------------
@dataclass
class CaseResult:
    flavour: str
    transport: str
    client: str
    report: SessionReport
    spans: list[SpanRecord] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    def spans_named(self, name: str, kind: str | None = None) -> list[SpanRecord]:
        return [s for s in self.spans if s.name == name and (kind is None or s.kind == kind)]

    def one_span(self, name: str, kind: str) -> SpanRecord:
        found = self.spans_named(name, kind)
        assert len(found) == 1, f"{kind} {name!r}: {len(found)} spans in {sorted(s.name for s in self.spans)}"
        return found[0]

    def points_of(self, metric: str, **attributes: Any) -> list[Point]:
        wanted = {key.replace("__", "."): value for key, value in attributes.items()}
        return [
            p
            for p in self.points
            if p.metric == metric and all(p.attributes.get(k) == v for k, v in wanted.items())
        ]


def skipped_tools(transport: str) -> set[str]:
    # Handshake-era stateless HTTP has no back-channel: a 1.x server's sampling request hangs.
    return {"sample"} if transport == "stateless-http" else set()


def run_case(telemetry: Telemetry, flavour: str, transport: str, client: str = "sdk") -> CaseResult:
    """One standard session; returns what both sides recorded (this process, plus a stdio server)."""
    telemetry.reset()
    skip = skipped_tools(transport)
    if transport == "stdio":
        with probed_stdio_target(flavour) as (target, read_probe):
            report = run_session(target, client, skip)
            server_spans, server_points = read_probe()
        spans, points = telemetry.collect()
        # The definition gauge keeps reporting the last listing it saw: in this process, an
        # earlier in-process case's server side. This case's server side is the subprocess.
        points = [p for p in points if not _is_server_definition(p)]
        return CaseResult(flavour, transport, client, report, spans + server_spans, points + server_points)
    if transport in harness.HTTP_TRANSPORTS:
        with http_server_thread(flavour, transport) as base_url:
            report = run_session(Target(flavour, transport, base_url=base_url), client, skip)
    else:
        report = run_session(Target(flavour, transport), client, skip)
    spans, points = telemetry.collect()
    return CaseResult(flavour, transport, client, report, spans, points)


def _is_server_definition(point: Point) -> bool:
    return (
        point.metric == "mcp_tokens.tool.definition" and point.attributes.get("mcp_tokens.side") == "server"
    )


def run_session(target: Target, client: str, skip: Iterable[str]) -> SessionReport:
    async def session() -> SessionReport:
        report = await run_standard_session(target, client=client, skip=skip, timeout_s=SESSION_TIMEOUT_S)
        await background_tasks_finished()
        return report

    return anyio.run(session)


async def background_tasks_finished(timeout_s: float = 10.0) -> None:
    """Let tasks a client left behind end gracefully before the loop closes and cancels them.

    fastmcp's stdio transport (keep_alive) holds its subprocess in a background task that only
    disconnects once the transport is collected; cancelled instead, it kills the server before
    the server can finish its session.
    """
    gc.collect()
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)


@contextlib.contextmanager
def http_server_thread(flavour: str, transport: str) -> Iterator[str]:
    """H6's ASGI app for `flavour` on `transport`, served by uvicorn in a thread of this process."""
    app = importlib.import_module(harness.server_module(flavour)).build_app().http_app(transport)
    port = harness.free_port()
    config = uvicorn.Config(
        app,
        host=harness.HOST,
        port=port,
        log_level="warning",
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{flavour}-{transport}", daemon=True)
    thread.start()
    try:
        harness.wait_for_port(port, harness.STARTUP_TIMEOUT_S)
        yield f"http://{harness.HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextlib.contextmanager
def probed_stdio_target(
    flavour: str,
) -> Iterator[tuple[Target, Callable[[], tuple[list[SpanRecord], list[Point]]]]]:
    """A stdio Target whose server process is instrumented; `read_probe()` after the session
    returns the server's spans and metrics (written when the server process exits)."""
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-v1-probe-") as tmp:
        site = Path(tmp)
        (site / "sitecustomize.py").write_text(
            "from tests.integration._v1_probe import install\ninstall()\n", encoding="utf-8"
        )
        out = site / "probe.json"
        env = {
            "PYTHONPATH": os.pathsep.join((str(site), str(harness.REPO_ROOT))),
            PROBE_ENV: str(out),
        }

        def read_probe() -> tuple[list[SpanRecord], list[Point]]:
            # The SDK's stdio client waits for the server to exit; fastmcp's (keep_alive) lets
            # it notice the closed stdin on its own, a moment later.
            deadline = time.monotonic() + PROBE_TIMEOUT_S
            while not out.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            data = json.loads(out.read_text(encoding="utf-8"))
            spans = [SpanRecord(**{**s, "events": tuple(map(tuple, s["events"]))}) for s in data["spans"]]
            return spans, [Point(**p) for p in data["points"]]

        yield Target(flavour, "stdio", env=env), read_probe


# --- exact expectations -------------------------------------------------------------------
class Expected:
    """Token counts by the documented rules, computed independently of the engine."""

    def __init__(self) -> None:
        self.encoding = load_bundled_encoding("o200k_base")

    def text(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def json(self, value: object) -> int:
        return self.text(json.dumps(value, separators=(",", ":"), ensure_ascii=False))

    @staticmethod
    def image(width: int, height: int) -> int:
        """Anthropic's formula for an image already inside the 1568 px / 1.15 MP limits."""
        assert max(width, height) <= 1568 and width * height <= 1_150_000
        return math.ceil(width * height / 750)

    def content(self, blocks: list[dict[str, Any]]) -> int:
        total = 0
        for block in blocks:
            if block["type"] == "text":
                total += self.text(block["text"])
            elif block["type"] == "image":
                total += self.image(payloads.PNG_WIDTH, payloads.PNG_HEIGHT)
            else:
                raise AssertionError(f"no expectation for block type {block['type']!r}")
        return total

    def tool_result(self, tool: str, arguments: dict[str, Any]) -> int:
        if tool == "sample":
            return self.text(payloads.sample_result_text(arguments["prompt"]))
        wire = payloads.tool_result_wire(tool, arguments)
        structured = wire.get("structuredContent")
        return self.content(wire["content"]) + (self.json(structured) if structured is not None else 0)

    def tool_definition(self, tool: dict[str, Any]) -> int:
        shown = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")
        return self.json({key: value for key, value in tool.items() if key in shown})

    def resource(self, uri: str) -> int:
        return self.text(payloads.resource_text(uri))

    def prompt(self, code: str) -> int:
        return self.text(payloads.review_prompt_text(code))

    def formatting_overhead(self, text: str) -> int:
        return self.text(text) - self.json(json.loads(text))

    def structure_overhead(self, value: object, tokens: int) -> int:
        return structure_tokens(value, tokens, self.text)
