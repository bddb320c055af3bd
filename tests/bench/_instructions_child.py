# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""One process of `tests.bench.instructions`: the saturation app's tool, called over ASGI.

    python -m tests.bench._instructions_child VARIANT CALLS

Sets up OpenTelemetry as `opentelemetry-instrument` would (SDK TracerProvider, a
MeterProvider with a reader), instruments with mcp-tokens unless VARIANT is `plain`, makes
`WARMUP` untimed calls (the counting service started and its tokenizer loaded), then CALLS
`tools/call` requests one after the other, each the full streamable-HTTP request path of a
stateless server, and waits until the analysis of every one is recorded. The parent runs
this under valgrind for two values of CALLS: the difference is what the calls cost.

Variants: `plain`, `patches` (the patches and spans, every span ended at the hand-off,
nothing analysed: saturation_app's `patches`), `instrumented`, and two with one part of the
analysis taken away, to split its cost: `no-metrics` (findings come back but no metric is
recorded) and `no-wire` (nothing is sent to the counting service: each exchange's span is
ended where the worker would send it, nothing recorded).

Every run ends by writing how many histogram measurements its MeterProvider took
(`histogram measurements: N`, on stderr), so that the parent can tell how many one call
makes, and what its calls cost per call that instructions do not show (`per call:
switches S user U system K analysis thread A`: voluntary context switches, CPU milliseconds
in user space and in the kernel, read with getrusage around the calls and the analysis, and
the analysis thread's own switches, read from /proc where the kernel names threads). `histogram` is
no variant of the call: it records CALLS measurements into one histogram with the
attributes of a token measurement, the price of one in the SDK.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import sys
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.instrumentation.mcp_tokens.os_names import ANALYSIS_THREAD
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from examples import demo_server

from .footprint import threads_switches
from .saturation_app import build_server, ending_spans_at_the_hand_off

WARMUP = 20
HEADERS = [
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", b"2025-06-18"),
    (b"host", b"127.0.0.1:8000"),
]


READER = InMemoryMetricReader()


def set_up(variant: str) -> None:
    trace.set_tracer_provider(TracerProvider())
    metrics.set_meter_provider(MeterProvider(metric_readers=[READER]))
    if variant == "plain":
        return
    from opentelemetry.instrumentation.mcp_tokens.instrumentor import McpTokensInstrumentor  # noqa: PLC0415

    McpTokensInstrumentor().instrument()
    if variant == "patches":
        ending_spans_at_the_hand_off()
    elif variant == "no-metrics":
        _without_metrics()
    elif variant == "no-wire":
        _without_the_wire()


def _without_metrics() -> None:
    from opentelemetry.instrumentation.mcp_tokens.telemetry import Recorder  # noqa: PLC0415

    Recorder.record_findings = lambda *_, **__: None  # type: ignore[method-assign]
    Recorder.record_duration = lambda *_, **__: None  # type: ignore[method-assign]


def _without_the_wire() -> None:
    from opentelemetry.instrumentation.mcp_tokens import pipeline  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.worker import AnalysisWorker  # noqa: PLC0415

    def send(self: Any, link: Any) -> None:
        while True:
            with self._lock:
                if not self._queued:
                    return
                exchange, weight = self._queued.popleft()
                if weight is None:
                    self._unweighed -= 1
                else:
                    self._held_chars -= weight
                self._open_spans.pop(id(exchange), None)
            pipeline._end_span(exchange)

    AnalysisWorker._send = send  # type: ignore[method-assign]


async def call_tool(app: Any, serial: int) -> None:
    request = {
        "jsonrpc": "2.0",
        "id": serial,
        "method": "tools/call",
        "params": {"name": "records", "arguments": {"seed": serial % 100}},
    }
    body = json.dumps(request).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [*HEADERS, (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    delivered = False
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client never disconnects
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    if statuses != [200]:
        raise RuntimeError(f"tools/call answered {statuses}")


def drain(*, ready: bool = False) -> None:
    """Wait until every exchange so far is recorded (and, first, for the tokenizer)."""
    from opentelemetry.instrumentation.mcp_tokens import worker  # noqa: PLC0415

    for analysis in list(worker._WORKERS):
        if (ready and not analysis.wait_ready(60)) or not analysis.force_flush(60):
            raise RuntimeError("the analysis did not catch up")


async def main(variant: str, calls: int) -> None:
    set_up(variant)
    analysed = variant not in ("plain", "patches")
    app = demo_server.http_app(build_server(), stateless=True)
    async with app.router.lifespan_context(app):
        for serial in range(WARMUP):
            await call_tool(app, serial)
        if analysed:
            drain(ready=True)
        before = resource.getrusage(resource.RUSAGE_SELF)
        thread_before = threads_switches(os.getpid(), ANALYSIS_THREAD)
        for serial in range(WARMUP, WARMUP + calls):
            await call_tool(app, serial)
        if analysed:
            drain()
        after = resource.getrusage(resource.RUSAGE_SELF)
        thread_after = threads_switches(os.getpid(), ANALYSIS_THREAD)
        thread = None if thread_before is None or thread_after is None else thread_after - thread_before
        print(kernel_line(before, after, calls, thread), file=sys.stderr)


def kernel_line(before: Any, after: Any, calls: int, thread_switches: int | None = None) -> str:
    """What the process's calls cost that instructions do not show, per call: the voluntary
    context switches (a thread that blocks: on a socket, a sleep, or the GIL), of them the
    analysis thread's (where the kernel names threads), and CPU time in user space and in
    the kernel (milliseconds)."""
    line = (
        f"per call: switches {(after.ru_nvcsw - before.ru_nvcsw) / calls:.3f}"
        f" user {1000 * (after.ru_utime - before.ru_utime) / calls:.4f}"
        f" system {1000 * (after.ru_stime - before.ru_stime) / calls:.4f}"
    )
    if thread_switches is not None:
        line += f" analysis thread {thread_switches / calls:.3f}"
    return line


def record_measurements(count: int) -> None:
    """`count` measurements of a payload's tokens, as the recorder makes them."""
    from opentelemetry.instrumentation.mcp_tokens import semconv  # noqa: PLC0415

    set_up("plain")
    histogram = metrics.get_meter("instructions").create_histogram(
        semconv.PAYLOAD, unit="{token}", explicit_bucket_boundaries_advisory=semconv.TOKEN_BUCKETS
    )
    attributes = {
        semconv.SIDE: "server",
        semconv.MCP_METHOD_NAME: "tools/call",
        semconv.SERVER_NAME: "saturation",
        semconv.GEN_AI_TOOL_NAME: "records",
        semconv.DIRECTION: "response",
        semconv.TOKENS_ENCODING: "o200k_base",
    }
    for serial in range(count):
        histogram.record(1000 + serial % 5000, attributes)


def histogram_measurements() -> int:
    """How many measurements every histogram of this process has taken."""
    data = READER.get_metrics_data()
    return sum(
        point.count
        for resource in (data.resource_metrics if data is not None else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if isinstance(metric.data, Histogram)
        for point in metric.data.data_points
    )


if __name__ == "__main__":
    variant, calls = sys.argv[1], int(sys.argv[2])
    if variant == "histogram":
        record_measurements(calls)
    else:
        asyncio.run(main(variant, calls))
    print(f"histogram measurements: {histogram_measurements()}", file=sys.stderr)
