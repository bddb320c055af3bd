# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How long the analysis makes an event loop wait, next to how long the MCP SDK itself makes
it wait for the same payload: `python -m tests.bench.loop_stall`.

The analysis runs in the counting service, but the instrumented process still encodes each
payload for it and records what comes back, on a background thread: any stretch of
Python there, or any C call that keeps the GIL (encoding a run of JSON values, freeing a
payload of many objects), delays every other thread of the process: an event loop whose
socket became readable cannot run until the worker gives the GIL up. That delay lands
directly on the MCP calls the loop serves.

This measures it without any MCP transport in the way (so machine noise is small): the
main thread runs an asyncio loop that sleeps 1 ms at a time and records how late each
wake-up is. Per payload kind, in one run, `--rounds` rounds (3) of two phases, one after
the other (which goes first alternates):

- the SDK: the loop itself receives the payload `--repeat` times as a response line, the
  way the installed MCP SDK does over stdio (the transport parses the JSON-RPC line and the
  session validates the result, both on the loop: tests/bench/_sdk.py). This is how long
  the payload stalls the loop without mcp-tokens;
- mcp-tokens: the real `Pipeline` (the counting service with the exact tokenizer, SDK
  MeterProvider and spans) analyses the same payloads while the loop ticks. No MCP call is
  in flight, so the worker does not wait for quiet: this is its behaviour when it runs.

The first row is the loop with nothing to do (the machine's floor). A wake-up can also be
late because a cyclic-GC collection ran (on any thread: CPython collects in whichever
thread's allocation crossed the threshold). Those are the host's pauses, whoever triggered
them, and their length depends on how many objects the whole process holds, so mcp-tokens'
phase is judged on the wake-ups that no collection overlapped ("worst, no GC"); the SDK's
worst counts every wake-up (its own allocations trigger its collections).

Each side's figure is the median over the rounds of each round's worst wake-up: a stall
that every analysis of the payload causes shows in it, one preemption of this process by
the machine's other work does not (the worst of all rounds is in the table too).

The bound of a payload: mcp-tokens may stall the loop for as long as the SDK does for that
payload (`--ratio` times it), or, where that is shorter, for the floor's worst plus
CPython's switch interval (`sys.getswitchinterval()`, 5 ms: how long any thread that runs
Python may keep the GIL from the loop before it is asked to give it up; such a row measures
the interpreter, and the column says so). `--analysis thread` runs the analysis on a thread
of this process instead (the fallback where no service can run). `--case` picks payload
kinds by name, `--json` prints the rows and `--slack-ms` widens the interpreter's allowance
(tests/bench/test_smoke.py, in `make test`, uses all three).

Exits 1 when a payload's worst lateness without GC is over its bound.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from ._compat import flush, start_analysis
from ._doc import add_markdown_option, table, write_section
from ._sdk import receiver, response_line
from .engine import json_payload

TICK_S = 0.001
# The bound: mcp-tokens may stall the loop for this many times what the SDK stalls it for the
# same payload (see the module docstring).
RATIO = 1.0


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
    """The loop while the pipeline analyses `repeat` payloads of this kind."""
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


async def measure_sdk(receive: Callable[[str, str], object], case: Case, repeat: int) -> Ticks:
    """The loop while it receives `repeat` responses of this kind as the MCP SDK does, one
    message at a time (a transport's reader hands the loop back between two lines)."""
    lines = [response_line(case.build()) for _ in range(repeat)]
    gc.collect()
    received = 0

    async def receive_all() -> None:
        nonlocal received
        for line in lines:
            await asyncio.sleep(TICK_S)
            receive(line, case.method)
            received += 1

    task = asyncio.create_task(receive_all())
    ticks = await _tick_until(lambda: received == len(lines), minimum_s=0.05)
    await task
    return ticks


@dataclass
class Row:
    name: str
    # One Ticks per round: mcp-tokens analysing the payloads, and the SDK receiving them on
    # the loop (none for the floor's row).
    ours: list[Ticks]
    sdk: list[Ticks] = field(default_factory=list)

    def ours_worst(self) -> float:
        """The median over rounds of each round's worst wake-up that no GC overlapped."""
        return statistics.median(max(ticks.without_gc) for ticks in self.ours)

    def sdk_worst(self) -> float:
        """The median over rounds of each round's worst wake-up while the SDK received."""
        return statistics.median(max(ticks.lateness) for ticks in self.sdk)


async def run(
    full: bool, repeat: int, rounds: int, analysis: str = "process", names: frozenset[str] | None = None
) -> list[Row]:
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    pipeline = Pipeline(
        Settings(analysis=analysis), MeterProvider(metric_readers=[reader]).get_meter("loop-stall")
    )
    if not start_analysis(pipeline, 60):
        raise RuntimeError("the tokenizer did not load")
    receive = receiver()
    rows = [Row("nothing to analyse (floor)", [await _tick_until(lambda: True, minimum_s=1.0)])]
    chosen = [case for case in cases(full) if names is None or case.name in names]
    for index, case in enumerate(chosen):
        row = Row(case.name, [])
        for round_index in range(rounds):
            # Which phase runs first alternates, so a drift of the machine favours neither.
            if (index + round_index) % 2 == 0:
                row.sdk.append(await measure_sdk(receive, case, repeat))
                row.ours.append(await measure(pipeline, tracer_provider, case, repeat))
            else:
                row.ours.append(await measure(pipeline, tracer_provider, case, repeat))
                row.sdk.append(await measure_sdk(receive, case, repeat))
        rows.append(row)
        sdk_ms, ours_ms = row.sdk_worst() * 1000, row.ours_worst() * 1000
        print(f"  {case.name}: SDK {sdk_ms:.2f} ms, mcp-tokens {ours_ms:.2f} ms", file=sys.stderr)
    pipeline.shutdown()
    return rows


@dataclass(frozen=True)
class Verdict:
    bound_s: float
    # "SDK" (ratio x the SDK's worst) or "interpreter" (the floor's worst + the switch interval).
    bound_by: str
    ok: bool


def verdict(row: Row, floor_worst_s: float, ratio: float) -> Verdict | None:
    """Whether mcp-tokens' worst stall without GC is within the payload's bound (None: the floor)."""
    if not row.sdk:
        return None
    by_sdk = ratio * row.sdk_worst()
    by_interpreter = floor_worst_s + sys.getswitchinterval()
    bound, bound_by = (by_sdk, "SDK") if by_sdk > by_interpreter else (by_interpreter, "interpreter")
    return Verdict(bound, bound_by, row.ours_worst() <= bound)


HEADER = (
    "payload",
    "ticks",
    "SDK worst ms",
    "worst, no GC, ms",
    "worst of all rounds ms",
    "p99.9 ms",
    "GCs",
    "bound ms",
    "bound by",
    "within",
)


def cells(row: Row, judged: Verdict | None) -> list[object]:
    lateness = [late for ticks in row.ours for late in ticks.lateness]
    return [
        row.name,
        len(lateness),
        f"{row.sdk_worst() * 1000:.2f}" if row.sdk else "-",
        f"{row.ours_worst() * 1000:.2f}",
        f"{max(lateness) * 1000:.2f}",
        f"{percentile(lateness, 0.999) * 1000:.2f}",
        sum(ticks.collections for ticks in row.ours),
        "-" if judged is None else f"{judged.bound_s * 1000:.2f}",
        "-" if judged is None else judged.bound_by,
        "-" if judged is None else ("yes" if judged.ok else "OVER"),
    ]


def as_json(row: Row, judged: Verdict | None) -> dict[str, object]:
    return {
        "payload": row.name,
        "sdk_worst_ms": round(row.sdk_worst() * 1000, 3) if row.sdk else None,
        "worst_no_gc_ms": round(row.ours_worst() * 1000, 3),
        "bound_ms": None if judged is None else round(judged.bound_s * 1000, 3),
        "bound_by": None if judged is None else judged.bound_by,
        "ok": None if judged is None else judged.ok,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="add the 20 MB payloads")
    parser.add_argument("--repeat", type=int, default=3, help="payloads of each kind analysed in a row")
    parser.add_argument("--rounds", type=int, default=3, help="SDK and mcp-tokens phases per payload kind")
    parser.add_argument("--ratio", type=float, default=RATIO, help="of the SDK's worst stall (the bound)")
    parser.add_argument("--analysis", choices=("process", "thread"), default="process")
    parser.add_argument("--case", action="append", help="a payload kind to run (repeatable; default: all)")
    parser.add_argument(
        "--slack-ms", type=float, default=0.0, help="added to the interpreter's allowance (a noisy machine)"
    )
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    names = frozenset(args.case) if args.case else None
    known = {case.name for case in cases(args.full)}
    if names is not None and not names <= known:
        parser.error(f"unknown payload kinds {sorted(names - known)}; expected some of {sorted(known)}")
    rows = asyncio.run(run(args.full, args.repeat, max(1, args.rounds), args.analysis, names))
    floor_worst = rows[0].ours_worst()
    judged = [verdict(row, floor_worst + args.slack_ms / 1000, args.ratio) for row in rows]
    over = [row.name for row, found in zip(rows, judged, strict=True) if found is not None and not found.ok]
    if args.json:
        print(json.dumps([as_json(row, found) for row, found in zip(rows, judged, strict=True)], indent=2))
    else:
        print(table(HEADER, [cells(row, found) for row, found in zip(rows, judged, strict=True)]))
    rule = (
        f"{args.ratio:g} x the SDK's worst stall for the same payload, or the floor's worst + "
        f"the switch interval ({sys.getswitchinterval() * 1000:g} ms) where that is longer"
        + (f", plus {args.slack_ms:g} ms" if args.slack_ms else "")
    )
    summary = (
        f"Over the bound ({rule}): {', '.join(over)}."
        if over
        else f"Every payload within its bound ({rule})."
    )
    if args.markdown:
        body = table(HEADER, [cells(row, found) for row, found in zip(rows, judged, strict=True)])
        write_section(args.markdown, "loop-stall", f"{body}\n\n{summary}", "tests.bench.loop_stall", argv)
    print(summary, file=sys.stderr if args.json else sys.stdout)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
