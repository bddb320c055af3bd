# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What one exchange costs, and where: `python -m tests.bench.worker_cost`.

An exchange's cost is split between the instrumented process, whose worker thread sends
the payloads to the counting service and records the findings that come back (spans,
metrics) on the application's interpreter, and the counting service, which tokenises and
looks for padding on CPU the application does not need (another process, idle priority).

This submits tools/call exchanges through the real `Pipeline` (its own counting service,
an SDK MeterProvider, spans ended and dropped), in bursts of 50 as calls would come, every
text different (the count cache never answers), and reports per exchange the CPU this
process used (the worker thread's: the main thread only waits) and the service's (Linux:
/proc). The last rows run the same with rounds back to back (`linger_s=0`) instead of
10 ms apart: what batching a burst into one round saves the application. With
`--analysis thread`, the whole analysis runs in this process, as where no service can run.
"""

from __future__ import annotations

import argparse
import itertools
import resource
import shutil
import tempfile
import time
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from ._doc import add_markdown_option, table, write_section
from .engine import json_payload
from .footprint import service_cpu_s, stop_service

SIZES = {"1 KB": 1_000, "50 KB": 50_000, "1 MB": 1_000_000}
CALLS = {1_000: 2000, 50_000: 400, 1_000_000: 20}
BURST = 50
_SERIAL = itertools.count()


def exchange_of(text: str, tracer: Tracer) -> Exchange:
    exchange = Exchange(Side.CLIENT, "tools/call", target="payload", server_name="bench")
    exchange.request = {"name": "payload", "arguments": {"size": len(text)}}
    exchange.span = tracer.start_span("tools/call payload")
    exchange.end_span = True
    exchange.finish({"content": [{"type": "text", "text": text}]})
    return exchange


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(
    pipeline: Pipeline, tracer: Tracer, text: str, calls: int, directory: Path
) -> tuple[float, float | None]:
    """ms of CPU per exchange: this process's, the service's."""
    exchanges = [exchange_of(f"{next(_SERIAL):>12}{text[12:]}", tracer) for _ in range(calls)]
    ours, theirs = process_cpu_s(), service_cpu_s(directory)
    for start in range(0, calls, BURST):
        for exchange in exchanges[start : start + BURST]:
            # Ended now, as a call's would be: built long before, its span would be past
            # SPAN_WAIT already and take the late path instead of waiting for its count.
            exchange.end_ns = time.time_ns()
            pipeline.submit(exchange)
        time.sleep(0.02)
    if not pipeline.force_flush(600):
        raise RuntimeError("the counting did not finish")
    ours = process_cpu_s() - ours
    after = service_cpu_s(directory)
    service_ms = None if theirs is None or after is None else (after - theirs) / calls * 1000
    return ours / calls * 1000, service_ms


def run(analysis: str, options: Options, directory: Path) -> list[list[str]]:
    settings = Settings.load({"analysis": analysis, "counter_dir": str(directory)})
    pipeline = Pipeline(
        settings, MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench"), options=options
    )
    if not pipeline.wait_ready(60):
        raise SystemExit("the counting did not start")
    tracer = TracerProvider().get_tracer("bench")
    rows = []
    for label, size in SIZES.items():
        text = json_payload(size)[:size]
        measure(pipeline, tracer, text, 5, directory)  # warm-up
        ours, theirs = measure(pipeline, tracer, text, CALLS[size], directory)
        rows.append([label, f"{options.linger_s * 1000:.0f} ms", str(CALLS[size]), f"{ours:.3f}"])
        rows[-1].append("-" if theirs is None else f"{theirs:.3f}")
        print(" | ".join(rows[-1]), flush=True)
    pipeline.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--analysis", choices=("process", "thread"), default="process")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="mct-cost-")) / "counter"
    try:
        rows = run(args.analysis, Options(), directory)
        if args.analysis == "process":
            rows += run(args.analysis, Options(linger_s=0.0), directory)
    finally:
        stop_service(directory)
        shutil.rmtree(directory.parent, ignore_errors=True)
    if args.markdown:
        header = [
            "tool result",
            "rounds apart",
            "exchanges",
            "this process, ms CPU",
            "counting service, ms CPU",
        ]
        section = "worker-cost" if args.analysis == "process" else "worker-cost-thread"
        body = f"Analysis: {args.analysis}.\n\n" + table(header, rows)
        write_section(args.markdown, section, body, "tests.bench.worker_cost", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
