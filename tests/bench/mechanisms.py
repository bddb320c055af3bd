# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What two of the worker's mechanisms buy: `python -m tests.bench.mechanisms`.

Each runs with and without the mechanism, side by side in this process, in rounds whose
order alternates, so that a slow spell of the machine favours neither.

- The loop-timed wake-up (worker.py). The first exchange of a round, handed over on an
  asyncio loop, has that loop wake the analysis thread `linger_s` later, instead of waking
  it at once through its socket; the thread then takes the GIL after the call rather than
  in the middle of it. Measured: the median duration of tool calls between the SDK's
  in-memory client and server, both in this instrumented process, 20 ms apart as an
  agent's calls are (its model thinks between them). Without: the thread woken at once.
- GIL slicing (`Options.slice_s`). While the analysis thread sends payloads or records
  findings, it hands the GIL to a waiting thread at least every `slice_s`. Measured: how
  late an asyncio loop's 1 ms sleeps wake up (the worst that no garbage collection
  overlapped, median over rounds) while the pipeline analyses payloads whose findings take
  long to record (tests.bench.loop_stall's). Without: `slice_s` of an hour, which leaves it
  to the interpreter's switch interval (5 ms).

Informational: no bound. The linger between rounds has its row in tests.bench.worker_cost,
a second counting process in tests.bench.counting.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting.options import OPTIONS, Options
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.instrumentation.mcp_tokens.worker import AnalysisWorker
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from . import loop_stall
from ._clients import Caller, connect
from ._compat import start_analysis
from ._doc import add_markdown_option, table, write_section
from .footprint import stop_service
from .instrumented import prepare_payloads, round_interval
from .instrumented_server import PAYLOAD_TOOL, BenchTelemetry, build_server

CALL_SIZES = {"1 KB": 1_000, "50 KB": 50_000}
THINK_S = 0.02
SLICING_CASES = (
    "pretty JSON 1 MB",
    "one 1 MB line of digits",
    "tools/list, 2000 tools",
    "20,000 one-character blocks",
    "tools/list, 20,000 bare tools",
)
WITHOUT_SLICING = OPTIONS._replace(slice_s=3600.0)
Rows = list[list[str]]


# --- the loop-timed wake-up -------------------------------------------------------------
@contextmanager
def woken_at_once(enabled: bool) -> Iterator[None]:
    """The worker as if it had no loop to schedule its wake-up on (when `enabled`)."""
    scheduled = AnalysisWorker._wake_later
    if enabled:
        AnalysisWorker._wake_later = lambda self: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        AnalysisWorker._wake_later = scheduled  # type: ignore[method-assign]


async def timed_calls(call: Caller, size: int, calls: int) -> list[float]:
    durations = []
    for _ in range(calls):
        started = time.perf_counter()
        await call(PAYLOAD_TOOL, {"size": size})
        durations.append(time.perf_counter() - started)
        await asyncio.sleep(THINK_S)
    return durations


async def wake_up_rows(payload_dir: Path, calls: int, rounds: int) -> Rows:
    prepare_payloads(payload_dir, list(CALL_SIZES.values()))
    telemetry = BenchTelemetry()
    telemetry.start()
    rows = []
    try:
        server = build_server(payload_dir, telemetry)
        async with connect(
            "memory",
            payload_dir=payload_dir,
            server_instrumented=True,
            memory_server=server,
            log_path=payload_dir / "memory.log",
        ) as call:
            for label, size in CALL_SIZES.items():
                await timed_calls(call, size, calls // 4)  # warm-up
                scheduled: list[list[float]] = []
                at_once: list[list[float]] = []
                for index in range(rounds):
                    for without in (False, True) if index % 2 == 0 else (True, False):
                        with woken_at_once(without):
                            (at_once if without else scheduled).append(await timed_calls(call, size, calls))
                rows.append(wake_up_row(label, scheduled, at_once))
                print(f"  wake-up, {label}: {rows[-1]}", file=sys.stderr)
    finally:
        telemetry.stop()
    return rows


def wake_up_row(label: str, scheduled: list[list[float]], at_once: list[list[float]]) -> list[str]:
    """Median call with the loop's wake-up, without it, and without / with (90% interval)."""
    with_ms = statistics.median(x for block in scheduled for x in block) * 1000
    without_ms = statistics.median(x for block in at_once for x in block) * 1000
    low, high = round_interval(scheduled, at_once, lambda u, i: statistics.median(i) / statistics.median(u))
    return [
        label,
        f"{with_ms:.3f}",
        f"{without_ms:.3f}",
        f"{without_ms / with_ms:.3f} ({low:.3f} .. {high:.3f})",
    ]


# --- GIL slicing ------------------------------------------------------------------------
def pipeline_with(options: Options) -> Pipeline:
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("mechanisms")
    pipeline = Pipeline(Settings(), meter, options=options)
    if not start_analysis(pipeline, 60):
        raise RuntimeError("the tokenizer did not load")
    return pipeline


async def slicing_rows(rounds: int, repeat: int) -> Rows:
    sliced, unsliced = pipeline_with(OPTIONS), pipeline_with(WITHOUT_SLICING)
    tracer_provider = TracerProvider()
    rows = []
    try:
        for case in (case for case in loop_stall.cases(False) if case.name in SLICING_CASES):
            worst: dict[bool, list[float]] = {True: [], False: []}
            for index in range(rounds):
                for slicing in (True, False) if index % 2 == 0 else (False, True):
                    pipeline = sliced if slicing else unsliced
                    ticks = await loop_stall.measure(pipeline, tracer_provider, case, repeat)
                    worst[slicing].append(max(ticks.without_gc))
            rows.append(slicing_row(case.name, worst[True], worst[False]))
            print(f"  slicing, {case.name}: {rows[-1]}", file=sys.stderr)
    finally:
        sliced.shutdown()
        unsliced.shutdown()
    return rows


def slicing_row(name: str, sliced: list[float], unsliced: list[float]) -> list[str]:
    with_ms, without_ms = statistics.median(sliced) * 1000, statistics.median(unsliced) * 1000
    return [name, f"{with_ms:.2f}", f"{without_ms:.2f}", f"{without_ms / with_ms:.2f}"]


# --- the report -------------------------------------------------------------------------
def render(wake_up: Rows, slicing: Rows, calls: int, rounds: int) -> str:
    wake_table = table(
        ["tool result", "with, ms (median call)", "woken at once, ms", "without / with (90% interval)"],
        wake_up,
    )
    slicing_table = table(
        ["payload", f"with ({OPTIONS.slice_s * 1000:g} ms), worst ms", "without, worst ms", "without / with"],
        slicing,
    )
    return (
        f"The loop-timed wake-up: {rounds} rounds of {calls} in-memory tool calls "
        f"{THINK_S * 1000:g} ms apart, each way.\n\n{wake_table}\n\n"
        f"GIL slicing: how late the loop's 1 ms sleeps wake up while the pipeline analyses the "
        f"payloads (worst without GC, median over the rounds).\n\n{slicing_table}"
    )


async def run(calls: int, rounds: int, repeat: int, payload_dir: Path) -> tuple[Rows, Rows]:
    # The calls first: the slicing payloads (up to 20,000 blocks) leave a heap whose
    # collections would slow every call after them, in both ways alike, but noisily.
    wake_up = await wake_up_rows(payload_dir, calls, rounds)
    slicing = await slicing_rows(rounds, repeat)
    return wake_up, slicing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=60, help="timed calls per block (default 60)")
    parser.add_argument("--rounds", type=int, default=12, help="rounds of both ways (default 12)")
    parser.add_argument("--repeat", type=int, default=3, help="payloads analysed per slicing block")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mct-mechanisms-") as directory:
        # A counting service of this benchmark's own, not the user's, stopped at the end.
        counter_dir = Path(directory) / "counter"
        os.environ["OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR"] = str(counter_dir)
        try:
            wake_up, slicing = asyncio.run(run(args.calls, args.rounds, args.repeat, Path(directory)))
        finally:
            stop_service(counter_dir)
    body = render(wake_up, slicing, args.calls, args.rounds)
    print("\n" + body)
    if args.markdown:
        write_section(args.markdown, "mechanisms", body, "tests.bench.mechanisms", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
