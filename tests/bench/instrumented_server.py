# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The MCP server and the telemetry harness of the instrumented-call benchmark.

- `build_server(payload_dir)`: the SDK's own high-level server (FastMCP on mcp 1.x,
  MCPServer on mcp 2.x) with two tools: `payload(size)` returns the JSON text stored in
  `payload_dir` for that size as one text block, with a serial number up front so every
  call's text differs and has the same token count (`distinct_text`);
  `bench_telemetry()` drains this process's analysis worker and returns what its
  telemetry recorded (JSON), so the benchmark can check the counts of a server subprocess.
- `BenchTelemetry`: an SDK TracerProvider (set globally once, as the mcp 2.x SDK and
  fastmcp trace through the global provider) whose exporter keeps a tally of the token
  counts on finished spans, never the spans, and, per instrumented block, a fresh
  MeterProvider with an in-memory reader and `McpTokensInstrumentor`.
- `python -m tests.bench.instrumented_server` serves over stdio; with
  `MCP_TOKENS_BENCH_INSTRUMENT=1` the process is instrumented first (and waits for the
  tokenizer to load, so the benchmark measures the steady state, not start-up).
"""

from __future__ import annotations

import importlib
import itertools
import json
import logging
import os
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, semconv
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from ._compat import flush

INSTRUMENT_ENV = "MCP_TOKENS_BENCH_INSTRUMENT"
PAYLOAD_DIR_ENV = "MCP_TOKENS_BENCH_PAYLOADS"
PAYLOAD_TOOL = "payload"
TELEMETRY_TOOL = "bench_telemetry"
SERVER_NAME = "mcp-tokens-bench"
DRAIN_TIMEOUT_S = 300.0
TOKENIZER_TIMEOUT_S = 60.0
SERIAL_DIGITS = 12


def payload_path(payload_dir: Path, size: int) -> Path:
    return payload_dir / f"payload-{size}.json"


def distinct_text(text: str, serial: int) -> str:
    """`text` with its first `SERIAL_DIGITS` characters replaced by a zero-padded serial
    number, so that no two calls return the same text (an analysis cache must not answer)
    and every call's text has the same token count: o200k_base splits a run of digits into
    pieces of three from its start, each piece one token, and the text after the digits
    is split as before."""
    return f"{serial % 10**SERIAL_DIGITS:0{SERIAL_DIGITS}d}{text[SERIAL_DIGITS:]}"


# `mcp_tokens.skipped` of a span that stopped waiting for its exact count.
SPAN_LATE = getattr(semconv, "SPAN_LATE", "late")


class SpanTally(SpanExporter):
    """Counts the `mcp_tokens.response` values of finished spans by side and span name (a span
    that ended before its exact count came counts as `late`), and drops the spans. An
    exporter that kept them (the SDK's in-memory one) would hold every span of a block in
    the heap, and each full garbage collection of the instrumented variant would walk them
    all: a cost of the benchmark, not of the instrumentation (a real exporter sends spans
    away)."""

    def __init__(self) -> None:
        # Spans end on the analysis worker and on the event loop's thread.
        self._lock = threading.Lock()
        self._tokens: Counter[tuple[str, str, str]] = Counter()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            attributes = span.attributes or {}
            tokens = attributes.get(semconv.TOKENS_RESPONSE)
            if attributes.get(semconv.TOKENS_SKIPPED) == SPAN_LATE:
                # Ended with an estimate after SPAN_WAIT: its exact count is on the metrics only.
                tokens = SPAN_LATE
            if tokens is not None:
                side = "client" if span.kind is trace.SpanKind.CLIENT else "server"
                with self._lock:
                    self._tokens[(side, span.name, str(tokens))] += 1
        return SpanExportResult.SUCCESS

    def tally(self) -> dict[tuple[str, str, str], int]:
        """(side, span name, tokens) -> how many finished spans carried that count."""
        with self._lock:
            return dict(self._tokens)

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()


class BenchTelemetry:
    """Real OpenTelemetry SDK providers with in-memory exporters, and the instrumentor."""

    def __init__(self) -> None:
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            trace.set_tracer_provider(TracerProvider())
            provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            raise RuntimeError(f"another global tracer provider is set: {provider!r}")
        self.tracer_provider = provider
        self.exporter = SpanTally()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.instrumentor = McpTokensInstrumentor()
        self._meter_provider: MeterProvider | None = None
        self._reader: InMemoryMetricReader | None = None

    @property
    def active(self) -> bool:
        return self._reader is not None

    def start(self) -> None:
        """Instrument with fresh metrics; return once the exact tokenizer is loaded."""
        self.exporter.clear()
        # The MCP SDK first, as an MCP application has it: mcp-tokens installs its patches
        # and its pipeline once the SDK is imported.
        importlib.import_module("mcp")
        self._reader = InMemoryMetricReader()
        self._meter_provider = MeterProvider(metric_readers=[self._reader])
        self.instrumentor.instrument(
            tracer_provider=self.tracer_provider, meter_provider=self._meter_provider
        )
        pipeline = self.instrumentor.pipeline
        if pipeline is None or not pipeline.wait_ready(TOKENIZER_TIMEOUT_S):
            raise RuntimeError("mcp-tokens did not start (or its tokenizer did not load)")

    def stop(self) -> None:
        if self._reader is None:
            return
        self.instrumentor.uninstrument()
        if self._meter_provider is not None:
            self._meter_provider.shutdown()
        self._reader = self._meter_provider = None
        self.exporter.clear()

    def summary(self, tool: str = PAYLOAD_TOOL) -> dict[str, Any]:
        """Drain the worker, then what the metrics and spans say about `tool`'s responses.

        `payload[side]` holds the sum and count of `mcp_tokens.payload` (tools/call
        responses of `tool`) counted exactly, `estimated[side]` how many were estimated;
        `skipped[side][reason]` the `mcp_tokens.analysis.skipped` counts of tools/call;
        `span_tokens[side]` the `mcp_tokens.response` values found on spans, with how often.
        """
        pipeline = self.instrumentor.pipeline
        if self._reader is None or pipeline is None:
            return {"instrumented": False}
        started = time.perf_counter()
        drained = flush(pipeline, DRAIN_TIMEOUT_S)
        drain_s = time.perf_counter() - started
        payload: dict[str, dict[str, int]] = defaultdict(lambda: {"sum": 0, "count": 0})
        estimated: dict[str, int] = defaultdict(int)
        skipped: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        data = self._reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        side = str(attributes.get(semconv.SIDE))
                        if metric.name == semconv.ANALYSIS_SKIPPED:
                            # Skips carry no tool name: count those of tools/call (the payload
                            # tool; this summary's own call is not analysed yet), not of the
                            # session's initialize or tools/list.
                            if attributes.get(semconv.MCP_METHOD_NAME) != "tools/call":
                                continue
                            reason = str(attributes.get(semconv.SKIP_REASON))
                            skipped[side][reason] += int(getattr(point, "value", 0))
                        elif metric.name == semconv.PAYLOAD and _is_response_of(attributes, tool):
                            if attributes.get(semconv.TOKENS_ENCODING) == "estimate":
                                estimated[side] += int(getattr(point, "count", 0))
                                continue
                            totals = payload[side]
                            totals["sum"] += int(getattr(point, "sum", 0))
                            totals["count"] += int(getattr(point, "count", 0))
        return {
            "instrumented": True,
            "drained": drained,
            "drain_s": drain_s,
            "payload": dict(payload),
            "estimated": dict(estimated),
            "skipped": {side: dict(reasons) for side, reasons in skipped.items()},
            "span_tokens": self._span_tokens(tool),
        }

    def _span_tokens(self, tool: str) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for (side, name, tokens), count in self.exporter.tally().items():
            if tool in name:
                found[side][tokens] += count
        return {side: dict(values) for side, values in found.items()}


def _is_response_of(attributes: dict[str, Any], tool: str) -> bool:
    return (
        attributes.get(semconv.DIRECTION) == semconv.DIRECTION_RESPONSE
        and attributes.get(semconv.MCP_METHOD_NAME) == "tools/call"
        and attributes.get(semconv.GEN_AI_TOOL_NAME) == tool
    )


def build_server(payload_dir: Path, telemetry: BenchTelemetry | None) -> Any:
    """FastMCP (mcp 1.x) or MCPServer (mcp 2.x) with the `payload` and `bench_telemetry` tools."""
    # The SDK loads here, not with this module: `main()` instruments the process first, as
    # `opentelemetry-instrument` does before an application imports anything.
    try:
        from mcp.server.mcpserver import MCPServer as ServerClass  # noqa: PLC0415
        from mcp_types import CallToolResult, TextContent  # noqa: PLC0415
    except ImportError:  # mcp 1.x
        from mcp.server.fastmcp import FastMCP as ServerClass  # type: ignore[no-redef]  # noqa: PLC0415
        from mcp.types import CallToolResult, TextContent  # type: ignore[no-redef]  # noqa: PLC0415

    texts: dict[int, str] = {}
    serials = itertools.count()

    def text_result(text: str) -> Any:
        return CallToolResult(content=[TextContent(type="text", text=text)])

    def payload(size: int) -> Any:
        if size not in texts:
            texts.clear()  # one size at a time: a 20 MB text is enough memory to hold
            texts[size] = payload_path(payload_dir, size).read_text(encoding="utf-8")
        return text_result(distinct_text(texts[size], next(serials)))

    def bench_telemetry() -> Any:
        summary = telemetry.summary() if telemetry is not None else {"instrumented": False}
        return text_result(json.dumps(summary))

    server = ServerClass(SERVER_NAME)
    # FastMCP 1.x logs every request at INFO: the same cost in both variants, but noise.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    server.tool(description="Returns a JSON document of about `size` characters.")(payload)
    server.tool(description="What this process's mcp-tokens telemetry recorded.")(bench_telemetry)
    return server


def main() -> None:
    # Both variants trace through the same SDK TracerProvider (as any process launched with
    # opentelemetry-instrument does), so the difference is mcp-tokens alone, not the cost of
    # recording the SDK's own spans.
    telemetry = BenchTelemetry()
    if os.environ.get(INSTRUMENT_ENV) == "1":
        telemetry.start()
    server = build_server(Path(os.environ[PAYLOAD_DIR_ENV]), telemetry)
    anyio.run(server.run_stdio_async)


if __name__ == "__main__":
    main()
