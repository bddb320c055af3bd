# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What GIL slicing buys: `python -m tests.bench.slicing`.

While the analysis thread sends payloads or records findings, it hands the GIL to a waiting
thread (an event loop) at least every `Options.slice_s`. This measures how late an asyncio
loop's 1 ms sleeps wake up (the worst that no garbage collection overlapped, median over
rounds) while the pipeline analyses payloads whose findings take long to record
(tests.bench.loop_stall's), with slicing and without (`slice_s` of an hour, which leaves it
to the interpreter's switch interval, 5 ms), side by side in this process, in rounds whose
order alternates, so that a slow spell of the machine favours neither.

Informational: no bound. The linger between rounds has its rows in
tests.bench.worker_cost, a second counting process in tests.bench.counting.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting.options import OPTIONS, Options
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from . import loop_stall
from ._compat import start_analysis
from ._doc import add_markdown_option, publish, table
from .footprint import own_counting_service

CASES = (
    "pretty JSON 1 MB",
    "one 1 MB line of digits",
    "tools/list, 2000 tools",
    "20,000 one-character blocks",
    "tools/list, 20,000 bare tools",
)
WITHOUT_SLICING = OPTIONS._replace(slice_s=3600.0)
Rows = list[list[str]]


def pipeline_with(options: Options) -> Pipeline:
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("slicing")
    pipeline = Pipeline(Settings(), meter, options=options)
    if not start_analysis(pipeline, 60):
        raise RuntimeError("the tokenizer did not load")
    return pipeline


async def rows_of(rounds: int, repeat: int) -> Rows:
    sliced, unsliced = pipeline_with(OPTIONS), pipeline_with(WITHOUT_SLICING)
    tracer_provider = TracerProvider()
    rows = []
    try:
        for case in (case for case in loop_stall.cases(False) if case.name in CASES):
            worst: dict[bool, list[float]] = {True: [], False: []}
            for index in range(rounds):
                for slicing in (True, False) if index % 2 == 0 else (False, True):
                    pipeline = sliced if slicing else unsliced
                    ticks = await loop_stall.measure(pipeline, tracer_provider, case, repeat)
                    worst[slicing].append(max(ticks.without_gc))
            rows.append(row(case.name, worst[True], worst[False]))
            print(f"  {case.name}: {rows[-1]}", file=sys.stderr)
    finally:
        sliced.shutdown()
        unsliced.shutdown()
    return rows


def row(name: str, sliced: list[float], unsliced: list[float]) -> list[str]:
    with_ms, without_ms = statistics.median(sliced) * 1000, statistics.median(unsliced) * 1000
    return [name, f"{with_ms:.2f}", f"{without_ms:.2f}", f"{without_ms / with_ms:.2f}"]


def render(rows: Rows, rounds: int) -> str:
    header = [
        "payload",
        f"with ({OPTIONS.slice_s * 1000:g} ms), worst ms",
        "without, worst ms",
        "without / with",
    ]
    return (
        f"How late the loop's 1 ms sleeps wake up while the pipeline analyses the payloads "
        f"(worst without GC, median over {rounds} rounds).\n\n{table(header, rows)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=12, help="rounds of both ways (default 12)")
    parser.add_argument("--repeat", type=int, default=3, help="payloads analysed per block (default 3)")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    with own_counting_service("mct-slicing-"):
        rows = asyncio.run(rows_of(args.rounds, args.repeat))
    body = render(rows, args.rounds)
    publish(body, args.markdown, "slicing", "tests.bench.slicing", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
