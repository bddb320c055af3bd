"""The analysis worker's CPU per exchange: `python -m tests.bench.worker_cost`.

Under sustained load the worker's own cost per exchange, not tokenizing, decides how many
exchanges it can take (see the README's performance section). This runs the real
`Pipeline._process` (analysis, metric recording on an SDK MeterProvider, span annotation
and ending) on one tools/call exchange at a time, on this thread, and reports the thread's
CPU time per exchange for 1 KB and 50 KB of JSON text (exact counting, then the estimate
the worker falls back to when it is far behind). The worker's pauses are sleeps, not CPU.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from .engine import json_payload

SIZES = {"1 KB": 1_000, "50 KB": 50_000}
_SERIAL = itertools.count()


def exchange_of(text: str, tracer: Tracer) -> Exchange:
    exchange = Exchange(Side.CLIENT, "tools/call", target="payload", server_name="bench")
    exchange.request = {"name": "payload", "arguments": {"size": len(text)}}
    exchange.span = tracer.start_span("tools/call payload")
    exchange.end_span = True
    exchange.finish({"content": [{"type": "text", "text": text}]})
    return exchange


def cpu_ms_per_exchange(pipeline: Pipeline, tracer: Tracer, text: str, backlog: bool, calls: int) -> float:
    """Median over 5 rounds of the thread CPU time per exchange, in ms. Every exchange's
    text differs (a serial number up front), so the token count cache never answers."""
    rounds = []
    for _ in range(5):
        texts = [f"{next(_SERIAL):>12}{text[12:]}" for _ in range(calls)]
        started = time.thread_time()
        for unique in texts:
            pipeline._process(exchange_of(unique, tracer), backlog=backlog)
        rounds.append((time.thread_time() - started) / calls * 1000)
    return statistics.median(rounds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="exchanges per round (default 400)")
    args = parser.parse_args(argv)
    pipeline = Pipeline(Settings(), MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("bench"))
    if not pipeline.loader.wait(60):
        raise SystemExit("the tokenizer did not load")
    tracer = TracerProvider().get_tracer("bench")
    print("worker CPU per tools/call exchange (median of 5 rounds), ms")
    print(f"{'payload':<8} {'exact':>8} {'estimate':>9}")
    for label, size in SIZES.items():
        text = json_payload(size)[:size]
        cpu_ms_per_exchange(pipeline, tracer, text, False, 50)  # warm-up (caches, imports)
        exact = cpu_ms_per_exchange(pipeline, tracer, text, False, args.calls)
        estimate = cpu_ms_per_exchange(pipeline, tracer, text, True, args.calls)
        print(f"{label:<8} {exact:>8.3f} {estimate:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
