# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What mcp-tokens adds to a tool call: `python -m tests.bench.instrumented` (`make bench-instrumented`).

For 1 KB, 50 KB, 1 MB and 20 MB of JSON text in a tool result, over stdio (a real server
subprocess) and in memory (the SDK's in-process client/server pair), it times the tool
call as the client sees it (`call_tool` until the result is returned), uninstrumented
and instrumented, in one run.

Method
- Blocks of calls alternate between the two variants (U I, then I U, ...), round after
  round over every cell, so machine noise and drift hit both alike; a time cap ends the
  run early with fewer rounds, never with a missing cell.
- Instrumented means `McpTokensInstrumentor` with SDK TracerProvider/MeterProvider in the
  client process and, over stdio, in the server subprocess too (in memory, one process is
  both sides and analyses each call twice). Metrics go to an in-memory reader; spans to
  an exporter that tallies their token counts and drops them, as a real exporter sends
  them away (one that kept a block's thousands of spans would make each full garbage
  collection of the instrumented variant longer).
- After each timed call the client pauses, as an agent's model turn would: by default
  long enough for each process's worker to count the payload exactly (`PACED_THINK_MS`,
  per size); `--think-ms` sets one pause for every size, 0 for calls back to back, where
  a call starts while the worker still has the previous payloads to count.
- Every call returns a different text (a serial number replaces its first characters,
  which leaves its token count unchanged), as real tools do: the analysis' count cache
  cannot answer for a text it has seen.
- Each block opens a new connection (stdio: a new server process) and makes warm-up
  calls that are not timed; the instrumented variant waits for the tokenizer to load
  first (start-up is not what is measured).
- After each instrumented block the analysis worker of each process is drained and the
  block is checked on each side: every tool response is in `mcp_tokens.payload`, either
  counted exactly (its tokens are tiktoken's count of the text, on the metric and on the
  span, unless the span stopped waiting for it after `SPAN_WAIT`: `late`) or estimated
  because the worker fell behind (`mcp_tokens.encoding="estimate"`, and counted once in
  `mcp_tokens.analysis.skipped{reason="backlog"}`); nothing dropped.
  Column `exact` is the share counted exactly.
- Reported per cell and variant: median and p99 (nearest rank) of the call time; the
  ratio of the medians; "p99 added" = p99(instrumented) - p99(uninstrumented) and
  "median added" = median(instrumented) - median(uninstrumented).

Exits 1 when a check fails, or when a 1 MB cell's ratio of medians is over `RATIO_BOUND`
(1.10), on either transport, with the whole of its 90% interval (resampling rounds, as for
the p99) over it too: a median over the bound whose interval holds it is reported as
"unresolved" (this machine's rounds differ by more than the bound's margin) and does not
fail the run. The p99 added is reported with its interval and the column
"p99 added < 1 ms" says whether the interval lies under 1 ms ("yes"), above it ("over") or
holds it ("unresolved"); it does not fail the run: a tail a millisecond long is within this
shared machine's own A/A noise (`--aa` measures it), so a bound there would report the
machine, not us.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import math
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding

from ._clients import TRANSPORTS, Caller, variant_session
from ._doc import add_markdown_option, write_section
from .engine import json_payload
from .instrumented_server import (
    PAYLOAD_TOOL,
    SPAN_LATE,
    TELEMETRY_TOOL,
    BenchTelemetry,
    build_server,
    distinct_text,
    payload_path,
)

SIZES = {"1 KB": 1_000, "50 KB": 50_000, "1 MB": 1_000_000, "20 MB": 20_000_000}
VARIANTS = ("uninstrumented", "instrumented")
BOUND_MS = 1.0
# The median ratio instrumented / uninstrumented that a 1 MB tool call may reach.
RATIO_BOUND = 1.10
RATIO_BOUND_SIZE = "1 MB"
# Serial numbers whose texts must all have the payload's one token count.
SERIAL_PROBES = (0, 7, 42_424, 123_456_789_012, 999_999_999_999)


@dataclass(frozen=True)
class Plan:
    calls: int  # timed calls per block
    warmup: int  # untimed calls per block
    rounds: int  # blocks per variant


# Enough calls that p99 is not one outlier: 1000, 800 and 300 timed calls per variant.
FULL = {
    1_000: Plan(100, 3, 10),
    50_000: Plan(100, 3, 8),
    1_000_000: Plan(30, 2, 10),
    20_000_000: Plan(3, 1, 4),
}
QUICK = {1_000: Plan(25, 3, 2), 50_000: Plan(15, 2, 2), 1_000_000: Plan(4, 1, 2), 20_000_000: Plan(2, 1, 2)}
# The pause after each call by default, per size: an agent's turn long enough for the worker
# of each process to count the payload exactly (60-100 ms of CPU per MB). Shorter pauses
# (`--think-ms`, 0 for back to back) measure a worker that cannot keep up: it estimates.
PACED_THINK_MS = {1_000: 50.0, 50_000: 50.0, 1_000_000: 250.0, 20_000_000: 4000.0}


@dataclass
class Cell:
    label: str
    size: int
    transport: str
    plan: Plan
    think_s: float
    # Call times per block, per variant (block i of each variant ran in round i).
    blocks: dict[str, list[list[float]]] = field(default_factory=lambda: {v: [] for v in VARIANTS})
    # Tool responses of the instrumented variant (both sides): counted exactly, estimated
    # (backlog), dropped (overload: by design only under sustained load).
    exact: int = 0
    estimated: int = 0
    dropped: int = 0
    failures: list[str] = field(default_factory=list)
    drain_s: float = 0.0  # longest wait for the workers after an instrumented block

    def samples(self, variant: str) -> list[float]:
        return [sample for block in self.blocks[variant] for sample in block]

    def stats(self) -> dict[str, Any]:
        result: dict[str, Any] = {
            "size": self.label,
            "bytes": self.size,
            "transport": self.transport,
            "think_ms": round(self.think_s * 1000, 3),
        }
        for variant in VARIANTS:
            samples = self.samples(variant)
            result[variant] = {
                "n": len(samples),
                "median_ms": _ms(statistics.median(samples)) if samples else None,
                "p99_ms": _ms(percentile(samples, 0.99)) if samples else None,
            }
        before, after = result["uninstrumented"], result["instrumented"]
        if before["n"] and after["n"]:
            result["median_ratio"] = round(after["median_ms"] / before["median_ms"], 4)
            result["median_added_ms"] = round(after["median_ms"] - before["median_ms"], 3)
            result["p99_added_ms"] = round(after["p99_ms"] - before["p99_ms"], 3)
            low, high = p99_added_interval(self.blocks["uninstrumented"], self.blocks["instrumented"])
            result["p99_added_interval_ms"] = [_ms(low), _ms(high)]
            low, high = median_ratio_interval(self.blocks["uninstrumented"], self.blocks["instrumented"])
            result["median_ratio_interval"] = [round(low, 4), round(high, 4)]
        result["max_drain_s"] = round(self.drain_s, 3)
        analysed = self.exact + self.estimated + self.dropped
        for name, count in (("exact", self.exact), ("estimated", self.estimated), ("dropped", self.dropped)):
            result[f"{name}_share"] = round(count / analysed, 4) if analysed else None
        result["checks"] = "ok" if not self.failures else self.failures
        return result


def p99_added_interval(before: list[list[float]], after: list[list[float]]) -> tuple[float, float]:
    """A 90% interval for p99(I) - p99(U)."""
    return round_interval(before, after, lambda u, i: percentile(i, 0.99) - percentile(u, 0.99))


def median_ratio_interval(before: list[list[float]], after: list[list[float]]) -> tuple[float, float]:
    """A 90% interval for median(I) / median(U)."""
    return round_interval(before, after, lambda u, i: statistics.median(i) / statistics.median(u))


def round_interval(
    before: list[list[float]],
    after: list[list[float]],
    statistic: Callable[[list[float], list[float]], float],
    resamples: int = 1000,
    seed: int = 1,
) -> tuple[float, float]:
    """A 90% interval for `statistic(U samples, I samples)`, from resampling rounds (a round's
    U and I blocks together, with replacement): how far it moves with which blocks ran when,
    the machine's own drift included."""
    rounds = min(len(before), len(after))
    if rounds < 2:
        value = statistic([x for b in before for x in b], [x for b in after for x in b])
        return value, value
    generator = random.Random(seed)
    values = []
    for _ in range(resamples):
        picked = [generator.randrange(rounds) for _ in range(rounds)]
        u = [x for index in picked for x in before[index]]
        i = [x for index in picked for x in after[index]]
        values.append(statistic(u, i))
    values.sort()
    return values[int(0.05 * resamples)], values[int(0.95 * resamples) - 1]


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least q of them at or below it."""
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


class Bench:
    def __init__(
        self,
        payload_dir: Path,
        log_path: Path,
        expected: dict[int, int],
        aa: bool = False,
    ) -> None:
        self.payload_dir = payload_dir
        # A/A: the "instrumented" variant runs uninstrumented too, so the table shows what
        # differences this machine produces between two identical variants (the noise floor).
        self.aa = aa
        self.log_path = log_path
        self.expected = expected
        self.telemetry = BenchTelemetry()
        self.memory_server = build_server(payload_dir, None)

    async def run_block(self, cell: Cell, variant: str) -> None:
        instrumented = variant == "instrumented" and not self.aa
        gc.collect()
        async with variant_session(
            cell.transport,
            instrumented=instrumented,
            telemetry=self.telemetry,
            payload_dir=self.payload_dir,
            memory_server=self.memory_server,
            log_path=self.log_path,
        ) as call:
            await self._calls(call, cell, variant)
            if instrumented:
                await self._check(call, cell)

    async def _calls(self, call: Caller, cell: Cell, variant: str) -> None:
        arguments = {"size": cell.size}
        for _ in range(cell.plan.warmup):
            text = await call(PAYLOAD_TOOL, arguments)
            if len(text) != cell.size:
                raise RuntimeError(f"the server returned {len(text)} characters, not {cell.size}")
            if cell.think_s:  # paced from the first call: a warm-up is a call like the others
                await asyncio.sleep(cell.think_s)
        samples: list[float] = []
        cell.blocks[variant].append(samples)
        for _ in range(cell.plan.calls):
            started = time.perf_counter()
            await call(PAYLOAD_TOOL, arguments)
            samples.append(time.perf_counter() - started)
            if cell.think_s:
                await asyncio.sleep(cell.think_s)

    async def _check(self, call: Caller, cell: Cell) -> None:
        """Every call of the block, on each instrumented side, counted exactly, or estimated
        because the analysis fell behind (`backlog`, counted as such), or, only when calls
        went on back to back, dropped (`overload`, counted as such)."""
        calls = cell.plan.warmup + cell.plan.calls
        summaries = {"client": self.telemetry.summary()}
        if cell.transport == "stdio":
            summaries["server"] = json.loads(await call(TELEMETRY_TOOL, {}))
        else:
            summaries["server"] = summaries["client"]
        tokens = self.expected[cell.size]
        for side, summary in summaries.items():
            cell.drain_s = max(cell.drain_s, float(summary.get("drain_s", 0.0)))
            found = summary.get("payload", {}).get(side, {"sum": 0, "count": 0})
            estimated = int(summary.get("estimated", {}).get(side, 0))
            exact = int(found["count"])
            skipped = dict(summary.get("skipped", {}).get(side, {}))
            dropped = int(skipped.pop("overload", 0))
            cell.exact += exact
            cell.estimated += estimated
            cell.dropped += dropped
            problems = []
            if not summary.get("drained"):
                problems.append("worker did not drain")
            if exact + estimated + dropped != calls:
                problems.append(f"{exact} exact + {estimated} estimated + {dropped} dropped != {calls} calls")
            if dropped and not self._sustained(cell):
                problems.append(f"{dropped} dropped (overload) though calls were not sustained")
            if found["sum"] != tokens * exact:
                problems.append(f"exact payloads sum to {found['sum']}, not {tokens} x {exact}")
            # An estimated call is two payloads: its arguments and its result.
            if skipped != ({"backlog": 2 * estimated} if estimated else {}):
                problems.append(f"skipped {skipped} (expected only backlog, twice per estimated call)")
            on_spans = summary.get("span_tokens", {}).get(side, {})
            span_exact, span_late = on_spans.get(str(tokens), 0), on_spans.get(SPAN_LATE, 0)
            # A span that ended late may belong to an exact or an estimated response; one with
            # the exact count, only to an exact one.
            if not span_exact <= exact <= span_exact + span_late:
                problems.append(f"{exact} exact, but {span_exact} spans carry it and {span_late} ended late")
            cell.failures.extend(f"{side}: {problem}" for problem in problems)

    @staticmethod
    def _sustained(cell: Cell) -> bool:
        """Whether the block's calls went on back to back: only then may counting fall so far
        behind that the queue's bounds are reached (`overload`)."""
        return cell.think_s == 0


def prepare_payloads(payload_dir: Path, sizes: list[int]) -> dict[int, int]:
    """Write each payload text; return tiktoken's own count (encode_ordinary) of the texts
    the tool returns, after checking that it is the same whatever their serial number."""
    encoding = load_bundled_encoding("o200k_base")
    expected = {}
    for size in sizes:
        text = json_payload(size)[:size]
        payload_path(payload_dir, size).write_text(text, encoding="utf-8")
        counts = {len(encoding.encode_ordinary(distinct_text(text, serial))) for serial in SERIAL_PROBES}
        if len(counts) != 1:
            raise RuntimeError(f"the {size}-character text's count depends on its serial: {counts}")
        expected[size] = counts.pop()
    return expected


async def run(cells: list[Cell], bench: Bench, time_cap_s: float, progress: bool) -> bool:
    """Rounds over every cell, alternating the variants' order; False if the time cap cut it short."""
    started = time.monotonic()
    for round_index in range(max(cell.plan.rounds for cell in cells)):
        order = VARIANTS if round_index % 2 == 0 else VARIANTS[::-1]
        for cell in cells:
            if round_index >= cell.plan.rounds:
                continue
            if time.monotonic() - started > time_cap_s:
                return False
            for variant in order:
                await bench.run_block(cell, variant)
            if progress:
                elapsed = time.monotonic() - started
                print(
                    f"  round {round_index + 1}: {cell.label} {cell.transport} ({elapsed:.0f} s)",
                    file=sys.stderr,
                )
    return True


def environment() -> dict[str, Any]:
    sdk = f"mcp {version('mcp')}"
    return {
        "sdk": sdk,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "machine": platform.machine(),
        "system": platform.system(),
    }


def table(results: list[dict[str, Any]]) -> str:
    header = (
        f"| {'payload':<7} | {'transport':<9} | {'pause ms':>8} | {'n':>9} | {'median U ms':>11} "
        f"| {'median I ms':>11} | {'ratio':>6} | {'p99 U ms':>9} | {'p99 I ms':>9} "
        f"| {'p99 added ms':>12} | {'90% interval':>15} | {'exact':>6} | {'est.':>5} "
        f"| {'dropped':>7} | p99 added < 1 ms | checks |"
    )
    lines = [header, "|" + "|".join("-" * (len(part)) for part in header.split("|")[1:-1]) + "|"]
    for r in results:
        before, after = r["uninstrumented"], r["instrumented"]
        counts = f"{before['n']}/{after['n']}"
        interval = r.get("p99_added_interval_ms")
        interval_text = "-" if interval is None else f"{interval[0]:.2f} .. {interval[1]:.2f}"
        lines.append(
            f"| {r['size']:<7} | {r['transport']:<9} | {r['think_ms']:>8g} | {counts:>9} "
            f"| {_fmt(before['median_ms']):>11} | {_fmt(after['median_ms']):>11} "
            f"| {_fmt(r.get('median_ratio'), 3):>6} "
            f"| {_fmt(before['p99_ms']):>9} | {_fmt(after['p99_ms']):>9} "
            f"| {_fmt(r.get('p99_added_ms')):>12} | {interval_text:>15} | {_share(r.get('exact_share')):>6} "
            f"| {_share(r.get('estimated_share')):>5} | {_share(r.get('dropped_share')):>7} "
            f"| {p99_verdict(r):>16} | {'ok' if r['checks'] == 'ok' else 'FAIL'} |"
        )
    return "\n".join(lines)


def ratio_over(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The 1 MB cells whose ratio of medians is over the bound, its interval included."""
    return [r for r in bounded_cells(results) if ratio_state(r) == "over"]


def bounded_cells(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in results if r["size"] == RATIO_BOUND_SIZE and r.get("median_ratio") is not None]


def ratio_state(result: dict[str, Any]) -> str:
    """ "ok" at or under the bound; "over" when its whole 90% interval is over it too;
    otherwise "unresolved": the rounds differ too much to tell."""
    if result["median_ratio"] <= RATIO_BOUND:
        return "ok"
    low = result.get("median_ratio_interval", [result["median_ratio"]])[0]
    return "over" if low > RATIO_BOUND else "unresolved"


def ratio_verdict(results: list[dict[str, Any]]) -> str:
    """One line: the 1 MB cells' ratios, with their intervals, against the bound."""
    shown = []
    for r in bounded_cells(results):
        low, high = r.get("median_ratio_interval", [r["median_ratio"]] * 2)
        shown.append(f"{r['transport']} {r['median_ratio']:.3f} ({low:.3f} .. {high:.3f}, {ratio_state(r)})")
    bound = f"a {RATIO_BOUND_SIZE} call's median ratio <= {RATIO_BOUND:.2f} on each transport"
    line = f"Bound: {bound} (90% intervals from resampling rounds): {', '.join(shown) or 'not measured'}."
    if any(ratio_state(r) == "unresolved" for r in bounded_cells(results)):
        line += (
            " Unresolved: the median is over the bound but the interval holds it; the rounds"
            " differ by more than the bound's margin, and the run does not fail on that."
        )
    return line


def p99_verdict(result: dict[str, Any]) -> str:
    """Whether the cell shows the p99 added under the bound ("yes"), at or over it ("over"),
    or neither, its 90% interval holding the bound ("unresolved")."""
    interval = result.get("p99_added_interval_ms")
    if interval is None:
        return "-"
    low, high = interval
    if high < BOUND_MS:
        return "yes"
    return "over" if low >= BOUND_MS else "unresolved"


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def think_ms(override: float | None, size: int) -> float:
    return PACED_THINK_MS[size] if override is None else override


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds (about 2 minutes)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help="comma-separated subset of: " + ", ".join(SIZES)
    )
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="stdio,memory or one of them")
    parser.add_argument(
        "--think-ms",
        type=float,
        default=None,
        help="pause after each timed call, every size (0: back to back); default per size, "
        + ", ".join(f"{label} {PACED_THINK_MS[size]:g} ms" for label, size in SIZES.items()),
    )
    parser.add_argument(
        "--aa",
        action="store_true",
        help="A/A run: both variants uninstrumented, to see this machine's noise floor",
    )
    parser.add_argument(
        "--block-calls",
        type=int,
        default=None,
        help="timed calls per block, every size (with --think-ms 0: how long a burst of calls lasts)",
    )
    parser.add_argument("--rounds", type=int, default=None, help="blocks per variant, every size")
    parser.add_argument("--time-cap", type=float, default=None, help="seconds (default 1200, quick 300)")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    labels = [label.strip() for label in args.sizes.split(",")]
    transports = [name.strip() for name in args.transports.split(",")]
    for label in labels:
        if label not in SIZES:
            parser.error(f"unknown size {label!r}; expected some of {list(SIZES)}")
    for name in transports:
        if name not in TRANSPORTS:
            parser.error(f"unknown transport {name!r}; expected some of {list(TRANSPORTS)}")
    plans = {
        size: dataclasses.replace(
            plan,
            calls=plan.calls if args.block_calls is None else max(1, args.block_calls),
            rounds=plan.rounds if args.rounds is None else max(1, args.rounds),
        )
        for size, plan in (QUICK if args.quick else FULL).items()
    }
    time_cap = args.time_cap if args.time_cap is not None else (300.0 if args.quick else 1200.0)
    cells = [
        Cell(label, size, transport, plans[size], think_ms(args.think_ms, size) / 1000)
        for label, size in ((label, SIZES[label]) for label in labels)
        for transport in transports
    ]
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-bench-") as tmp:
        payload_dir = Path(tmp)
        expected = prepare_payloads(payload_dir, [SIZES[label] for label in labels])
        bench = Bench(payload_dir, payload_dir / "servers.log", expected, args.aa)
        started = time.monotonic()
        complete = asyncio.run(run(cells, bench, time_cap, progress=not args.json))
        elapsed = time.monotonic() - started
    results = [cell.stats() for cell in cells]
    failed = any(r["checks"] != "ok" for r in results)
    over = [] if args.aa else ratio_over(results)
    if args.json:
        report = {
            "environment": environment(),
            "think_ms": args.think_ms,  # None: per size (each cell has its own)
            "aa": args.aa,
            "complete": complete,
            "elapsed_s": round(elapsed, 1),
        }
        print(json.dumps({**report, "bound_ms": BOUND_MS, "cells": results}, indent=2))
    else:
        env = environment()
        print(f"mcp-tokens instrumented tool calls: {env['sdk']}, Python {env['python']}, {env['cpus']} CPUs")
        if args.aa:
            print("A/A run: I is uninstrumented too (the machine's noise floor for these statistics)")
        print("U = uninstrumented, I = instrumented (client and server); n = timed calls U/I;")
        print("p99 added = p99(I) - p99(U); ratio = median(I) / median(U); pause = after each call;")
        print("90% interval: of p99 added, resampling whole rounds (the machine's drift included);")
        print("exact / est. / dropped: tool responses counted exactly, estimated (backlog), dropped")
        print("(overload: only when calls go on back to back)\n")
        print(table(results))
        print(f"\n{elapsed:.0f} s" + ("" if complete else " (time cap reached: fewer rounds)"))
    if args.markdown:
        capped = "" if complete else "\n\nThe time cap ended this run early: fewer rounds than planned."
        write_section(
            args.markdown,
            "instrumented",
            table(results) + "\n\n" + ratio_verdict(results) + capped,
            "tests.bench.instrumented",
            argv,
        )
        for r in results:
            if r["checks"] != "ok":
                print(f"FAILED {r['size']} {r['transport']}: {'; '.join(r['checks'])}")
    for r in over:
        # stderr: with --json, stdout holds the report alone.
        print(
            f"OVER {r['size']} {r['transport']}: median ratio {r['median_ratio']} > {RATIO_BOUND}",
            file=sys.stderr,
        )
    return 1 if failed or over else 0


if __name__ == "__main__":
    sys.exit(main())
