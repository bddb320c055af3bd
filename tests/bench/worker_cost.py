# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What one exchange's analysis costs, and where: `python -m tests.bench.worker_cost`.

The analysis of an exchange is split between two processes: the instrumented process
encodes the payloads for its helper and records the findings that come back (spans,
metrics) on its worker thread, and that CPU is taken from the application's interpreter;
the helper tokenises and looks for padding, on CPU the application does not need (it
runs at the lowest priority, with a GIL of its own).

This submits tools/call exchanges through the real `Pipeline` (helper process, SDK
MeterProvider, spans ended and dropped), one batch per size, every text different (so
the count cache never answers), and reports per exchange: the CPU this process used
(its whole CPU time while the main thread only waits, so the worker thread's) and the
CPU the helper used (Linux: from /proc). With `--analysis thread` the whole analysis
runs in this process, as where no helper can be started.
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import time
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from ._compat import flush, start_analysis
from ._doc import add_markdown_option, table, write_section
from .engine import json_payload

SIZES = {"1 KB": 1_000, "50 KB": 50_000, "1 MB": 1_000_000}
CALLS = {1_000: 2000, 50_000: 400, 1_000_000: 20}
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


def helper_cpu_s(pipeline: Pipeline) -> float | None:
    """The helper's CPU time so far (Linux), None where it cannot be read."""
    pid = getattr(pipeline.worker._link, "pid", None)
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(pipeline: Pipeline, tracer: Tracer, text: str, calls: int) -> tuple[float, float | None]:
    """ms of CPU per exchange: this process's, the helper's."""
    exchanges = [exchange_of(f"{next(_SERIAL):>12}{text[12:]}", tracer) for _ in range(calls)]
    ours, helper = process_cpu_s(), helper_cpu_s(pipeline)
    # Submitted in bursts with pauses, as calls arrive: the queue never overflows.
    for start in range(0, calls, 50):
        for exchange in exchanges[start : start + 50]:
            pipeline.submit(exchange)
        time.sleep(0.02)
    if not flush(pipeline, 600):
        raise RuntimeError("the analysis did not finish")
    ours = process_cpu_s() - ours
    helper_after = helper_cpu_s(pipeline)
    helper_ms = None if helper is None or helper_after is None else (helper_after - helper) / calls * 1000
    return ours / calls * 1000, helper_ms


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--analysis", choices=("process", "thread"), default="process")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    pipeline = Pipeline(
        Settings(analysis=args.analysis),
        MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench"),
    )
    if not start_analysis(pipeline, 60):
        raise SystemExit("the analysis did not start")
    tracer = TracerProvider().get_tracer("bench")
    print(f"CPU per tools/call exchange, ms (analysis: {pipeline.worker.mode})")
    print(f"{'payload':<8} {'this process':>13} {'helper':>8}")
    rows = []
    for label, size in SIZES.items():
        text = json_payload(size)[:size]
        measure(pipeline, tracer, text, 5)  # warm-up
        ours, helper = measure(pipeline, tracer, text, CALLS[size])
        helper_text = "-" if helper is None else f"{helper:.3f}"
        print(f"{label:<8} {ours:>13.3f} {helper_text:>8}")
        rows.append([label, CALLS[size], f"{ours:.3f}", helper_text])
    mode = pipeline.worker.mode
    pipeline.shutdown()
    if args.markdown:
        header = ["tool result", "exchanges", "this process, ms CPU", "helper, ms CPU"]
        section = "worker-cost" if args.analysis == "process" else "worker-cost-thread"
        body = f"Analysis: {mode}.\n\n" + table(header, rows)
        write_section(args.markdown, section, body, "tests.bench.worker_cost", argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
