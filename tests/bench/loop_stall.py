# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How long the analysis makes an event loop wait: `python -m tests.bench.loop_stall`.

The analysis runs in a helper process, but the instrumented process still encodes each
payload for it and records what comes back, on a background thread: any stretch of
Python there, or any C call that keeps the GIL (encoding a run of JSON values, freeing a
payload of many objects), delays every other thread of the process: an event loop whose
socket became readable cannot run until the worker gives the GIL up. That delay lands
directly on the MCP calls the loop serves.

This measures it without any MCP transport in the way (so machine noise is small): the
main thread runs an asyncio loop that sleeps 1 ms at a time and records how late each
wake-up is, while the real `Pipeline` (helper process with the exact tokenizer, SDK
MeterProvider and spans) handles one kind of payload after another. No MCP call is in
flight, so the worker does not wait for quiet: this is its behaviour when it runs.
Per payload it reports the worst and the 99.9th-percentile lateness of the loop, next
to the same loop with nothing to analyse (the machine's floor). `--analysis thread` runs
the analysis on a thread of this process instead (the fallback where no helper can run).

A wake-up can also be late because a cyclic-GC collection ran (on any thread: CPython
collects in whichever thread's allocation crossed the threshold). Those are the host's
pauses, whoever triggered them, and their length depends on how many objects the whole
process holds, so the probe records every collection and reports the lateness of the
wake-ups that no collection overlapped ("worst, no GC") apart from the rest.

Exits 1 when, for any payload, the worst lateness that no collection explains exceeds
the floor's worst by more than `--bound-ms` (default 1 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from ._compat import flush, start_analysis
from ._doc import add_markdown_option, table, write_section
from .engine import json_payload

TICK_S = 0.001


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    build: Callable[[], dict[str, object]]


def _text_result(text: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _records(size: int) -> list[dict[str, object]]:
    """Rows of a typical API answer, about `size` characters of compact JSON in all."""
    rows: list[dict[str, object]] = []
    total = 0
    index = 0
    while total < size:
        row = {
            "id": f"ord-{index:07d}",
            "customer": {"name": f"Customer {index % 977}", "tier": ["gold", "silver", "bronze"][index % 3]},
            "amount": round(index * 1.37 % 9999, 2),
            "items": [{"sku": f"SKU-{index * 7 % 10007}", "qty": index % 5 + 1}],
            "note": "delivered on time, signed by the front desk" if index % 4 else None,
        }
        rows.append(row)
        total += len(json.dumps(row, separators=(",", ":")))
        index += 1
    return rows


def _structured(size: int) -> dict[str, object]:
    """structuredContent with the same JSON as text, as the spec advises (a duplicate)."""
    value = {"orders": _records(size // 2)}
    text = json.dumps(value, separators=(",", ":"))
    return {"content": [{"type": "text", "text": text}], "structuredContent": value, "isError": False}


def _pretty(size: int) -> dict[str, object]:
    return _text_result(json.dumps({"orders": _records(size // 2)}, indent=2))


def _tool_list(count: int) -> dict[str, object]:
    tools = [
        {
            "name": f"tool_{index}",
            "description": f"Looks up record {index} in the catalogue and returns its fields. " * 3,
            "inputSchema": {
                "type": "object",
                "properties": {f"field_{k}": {"type": "string", "description": "a filter"} for k in range(8)},
                "required": ["field_0"],
            },
        }
        for index in range(count)
    ]
    return {"tools": tools}


def _tiny_blocks(count: int) -> dict[str, object]:
    return {"content": [{"type": "text", "text": str(index % 10)} for index in range(count)]}


def _bare_tools(count: int) -> dict[str, object]:
    return {"tools": [{"name": f"t{index}", "inputSchema": {"type": "object"}} for index in range(count)]}


def _image(size: int) -> dict[str, object]:
    # A PNG header with plausible dimensions, then filler: the analysis reads the header only.
    header = bytes.fromhex("89504e470d0a1a0a0000000d49484452000004000000030008060000005c72a866")
    data = base64.b64encode(header + bytes(size - len(header))).decode()
    return {"content": [{"type": "image", "data": data, "mimeType": "image/png"}]}


def cases(full: bool) -> list[Case]:
    sizes = [50_000, 1_000_000, *([20_000_000] if full else [])]
    found: list[Case] = [Case("json text 1 KB", "tools/call", lambda: _text_result(json_payload(1_000)))]
    for size in sizes:
        label = f"{size // 1000:,} KB" if size < 1_000_000 else f"{size // 1_000_000} MB"
        found += [
            Case(f"json text {label}", "tools/call", lambda size=size: _text_result(json_payload(size))),
            Case(f"structuredContent {label}", "tools/call", lambda size=size: _structured(size)),
            Case(f"pretty JSON {label}", "tools/call", lambda size=size: _pretty(size)),
        ]
    found += [
        Case(
            "CJK prose 1 MB",
            "tools/call",
            lambda: _text_result("数据分析报告显示，本季度销售额增长。" * 55_000),
        ),
        Case("zero-width padded 1 MB", "tools/call", lambda: _text_result("note\u200b" * 200_000)),
        Case("'a' x 1M", "tools/call", lambda: _text_result("a" * 1_000_000)),
        Case("one 1 MB line of digits", "tools/call", lambda: _text_result("7" * 1_000_000)),
        Case("tools/list, 2000 tools", "tools/list", lambda: _tool_list(2000)),
        # Hostile shapes: Python work per node, not per character.
        Case("20,000 one-character blocks", "tools/call", lambda: _tiny_blocks(20_000)),
        Case("tools/list, 20,000 bare tools", "tools/list", lambda: _bare_tools(20_000)),
        Case("image 5 MB", "tools/call", lambda: _image(5_000_000)),
    ]
    return found


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


class GcLog:
    """(start, end) of every cyclic-GC collection while installed, whatever thread ran it."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._started = 0.0

    def __enter__(self) -> GcLog:
        gc.callbacks.append(self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._note)

    def _note(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.spans.append((self._started, time.perf_counter()))

    def overlaps(self, start: float, end: float) -> bool:
        return any(gc_start < end and gc_end > start for gc_start, gc_end in self.spans)


@dataclass
class Ticks:
    lateness: list[float]
    # Lateness of the wake-ups that no GC collection overlapped.
    without_gc: list[float]
    collections: int


async def _tick_until(done: Callable[[], bool], minimum_s: float) -> Ticks:
    """Sleep TICK_S at a time until `done()` (and at least `minimum_s`); each wake-up's lateness."""
    wakeups: list[tuple[float, float]] = []
    started = time.perf_counter()
    with GcLog() as log:
        while not done() or time.perf_counter() - started < minimum_s:
            before = time.perf_counter()
            await asyncio.sleep(TICK_S)
            wakeups.append((before, time.perf_counter()))
    # Matched afterwards: a collection that made a wake-up late may not be logged yet when
    # the loop resumes (its "stop" callback is Python, which can hand the GIL over first).
    lateness = [after - before - TICK_S for before, after in wakeups]
    without_gc = [after - before - TICK_S for before, after in wakeups if not log.overlaps(before, after)]
    return Ticks(lateness, without_gc or [0.0], len(log.spans))


async def measure(pipeline: Pipeline, tracer_provider: TracerProvider, case: Case, repeat: int) -> Ticks:
    tracer = tracer_provider.get_tracer("loop-stall")
    payloads = [case.build() for _ in range(repeat)]
    gc.collect()  # building the payloads is not the analysis: start from a collected heap
    for response in payloads:
        exchange = Exchange(Side.CLIENT, case.method, target="payload", server_name="bench")
        exchange.span = tracer.start_span(case.method)
        exchange.end_span = True
        exchange.finish(response)
        pipeline.submit(exchange)
    return await _tick_until(lambda: flush(pipeline, 0), minimum_s=0.05)


Row = tuple[str, Ticks]


async def run(full: bool, repeat: int, analysis: str = "process") -> list[Row]:
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    pipeline = Pipeline(
        Settings(analysis=analysis), MeterProvider(metric_readers=[reader]).get_meter("loop-stall")
    )
    if not start_analysis(pipeline, 60):
        raise RuntimeError("the tokenizer did not load")
    rows: list[Row] = [("nothing to analyse (floor)", await _tick_until(lambda: True, minimum_s=1.0))]
    for case in cases(full):
        ticks = await measure(pipeline, tracer_provider, case, repeat)
        rows.append((case.name, ticks))
        print(f"  {case.name}: worst {max(ticks.lateness) * 1000:.2f} ms", file=sys.stderr)
    pipeline.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="add the 20 MB payloads")
    parser.add_argument("--repeat", type=int, default=3, help="payloads of each kind analysed in a row")
    parser.add_argument("--bound-ms", type=float, default=1.0)
    parser.add_argument("--analysis", choices=("process", "thread"), default="process")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    rows = asyncio.run(run(args.full, args.repeat, args.analysis))
    floor_worst = max(rows[0][1].without_gc)
    print(f"{'payload':<30} {'ticks':>6} {'worst ms':>9} {'p99.9 ms':>9} {'worst, no GC':>13} {'GCs':>5}")
    over = []
    cells = []
    for name, ticks in rows:
        worst, clean = max(ticks.lateness), max(ticks.without_gc)
        p999 = percentile(ticks.lateness, 0.999)
        print(
            f"{name:<30} {len(ticks.lateness):>6} {worst * 1000:>9.2f} "
            f"{p999 * 1000:>9.2f} {clean * 1000:>13.2f} {ticks.collections:>5}"
        )
        cells.append(
            [
                name,
                len(ticks.lateness),
                f"{worst * 1000:.2f}",
                f"{p999 * 1000:.2f}",
                f"{clean * 1000:.2f}",
                ticks.collections,
            ]
        )
        if clean - floor_worst > args.bound_ms / 1000:
            over.append(name)
    if args.markdown:
        header = ["payload", "ticks", "worst ms", "p99.9 ms", "worst, no GC, ms", "GCs"]
        verdict = (
            f"Over the bound ({args.bound_ms:g} ms above the floor's worst): {', '.join(over)}."
            if over
            else f"Every payload within {args.bound_ms:g} ms of the floor's worst."
        )
        write_section(
            args.markdown,
            "loop-stall",
            table(header, cells) + "\n\n" + verdict,
            "tests.bench.loop_stall",
            argv,
        )
    if over:
        print(f"over the bound ({args.bound_ms:g} ms above the floor's worst): {', '.join(over)}")
        return 1
    print(f"every payload within {args.bound_ms:g} ms of the floor's worst")
    return 0


if __name__ == "__main__":
    sys.exit(main())
