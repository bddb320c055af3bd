# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the guard costs on the response path: `python -m tests.bench.guard`.

1. Results under the limit: tools/call in memory (the test apps' low-level server and the
   SDK client, both instrumented in this process), guard off against GUARD=truncate with the
   default limit (25,000 tokens), in rounds of three neighbouring blocks within one run: off,
   off again, on, each round in another order. Each result size is its own row: a block's
   calls of each size are timed apart, and a row's ratio is the median over the rounds of
   each round's median on / median off for that size. (The median of a block that mixes a
   2 ms and a 3 ms call falls in the gap between them, where it measures the tails, not the
   calls.) Off again / off, measured alike, is the machine's own noise (A/A), with a 90%
   interval from resampling the rounds. Results of at most 25,000 bytes fit by their size
   alone: their ratio must stay within `--max-ratio`; past it the run fails only when the
   A/A interval lies within the bound either way (1/bound .. bound), and otherwise reports
   the row as unresolved. A 60 KB result (about 20,000 tokens) must be counted to be known to fit,
   by the server's guard and again by the client's: its ratio is reported, not bounded.
2. A 20 MB result cut to 25,000 tokens: the guard's decision and cut (assess + truncate,
   with its real tokenizer), the best CPU time of a few runs; fails above `--max-cut-s`.
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.guard.results import Results
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import GuardTokenizer

from tests.integration.apps.client import Target, connect
from tests.integration.v2_support import instrumented

from ._doc import add_markdown_option, table, write_section
from ._timing import best_cpu_seconds_each
from .engine import json_payload

# (label, tool, arguments): about 1 KB and 20 KB of JSON, which fit 25,000 tokens by their
# size...
SIZED_OUT = (("1 KB", "records", {"n": 10}), ("20 KB", "records", {"n": 200}))
# ...and about 60 KB (some 20,000 tokens), which must be counted to be known to fit.
COUNTED = (("60 KB", "records", {"n": 600}),)
LIMIT = 25_000


Calls = tuple[tuple[str, str, dict[str, Any]], ...]


async def _timed_calls(calls: Calls, rounds: int) -> list[list[float]]:
    """The times of each call of `calls` (a list per call), made `rounds` times in turn."""
    seconds: list[list[float]] = [[] for _ in calls]
    async with connect(Target("lowlevel", "memory")) as driver:
        await driver.list_tools()
        for _, name, arguments in calls:  # warm up
            await driver.call_tool(name, arguments)
        for _ in range(rounds):
            for times, (_, name, arguments) in zip(seconds, calls, strict=True):
                start = time.perf_counter()
                await driver.call_tool(name, arguments)
                times.append(time.perf_counter() - start)
    return seconds


def _block(guard: str, calls: Calls, rounds: int) -> list[list[float]]:
    settings: dict[str, Any] = {"guard": guard} if guard != "off" else {}
    with instrumented(**settings) as telemetry:
        # Both modes timed once counting is connected (the counting service started and
        # answering), and the guard's measure too: only the guard's own work differs.
        telemetry.instrumentor.pipeline.wait_ready(60.0)
        if telemetry.instrumentor.guard is not None:
            telemetry.instrumentor.guard.wait_ready(60.0)
        return anyio.run(_timed_calls, calls, rounds)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class OffAndOn:
    """Call times of the guard off and on, and off again (A/A), in rounds of neighbouring
    blocks."""

    off: list[list[float]]
    on: list[list[float]]
    again: list[list[float]] = field(default_factory=list)  # off once more: the machine's noise

    @property
    def medians(self) -> tuple[float, float]:
        """The median call of each mode, its blocks together."""
        return _pooled_median(self.off), _pooled_median(self.on)

    @property
    def ratio(self) -> float:
        """The median, over the rounds, of one round's median on / median off.

        The machine's speed drifts by tens of percent over seconds (a shared host): blocks
        that ran back to back saw the same machine, so each round's ratio carries little of
        that drift, and the median over rounds discards the rounds a burst split.
        """
        return statistics.median(_ratios(self.off, self.on))

    def noise(self, resamples: int = 2000, seed: int = 1) -> tuple[float, float, float]:
        """The A/A ratio (off again / off) measured like `ratio`, and its 90% interval from
        resampling the rounds: how far two blocks of the same mode differ on this machine."""
        ratios = _ratios(self.off, self.again)
        generator = random.Random(seed)
        medians = sorted(
            statistics.median(generator.choices(ratios, k=len(ratios))) for _ in range(resamples)
        )
        return statistics.median(ratios), medians[int(0.05 * resamples)], medians[int(0.95 * resamples) - 1]

    def verdict(self, bound: float) -> str:
        """ "ok" within `bound`; "over" past it while the A/A interval lies within it either
        way (1/bound .. bound); otherwise "unresolved": the machine too noisy to tell."""
        if self.ratio <= bound:
            return "ok"
        if not self.again:
            return "over"
        _, low, high = self.noise()
        return "over" if 1 / bound <= low and high <= bound else "unresolved"


def _ratios(base: list[list[float]], other: list[list[float]]) -> list[float]:
    return [statistics.median(b) / statistics.median(a) for a, b in zip(base, other, strict=True)]


def _pooled_median(blocks: list[list[float]]) -> float:
    return statistics.median(seconds for block in blocks for seconds in block)


# The orders of a round's three blocks (off, off again, on), taken in turn so that each
# runs first, second and last equally often.
ORDERS = list(itertools.permutations(("off", "again", "truncate")))


def off_and_on(calls: Calls, rounds_of_blocks: int, rounds: int) -> dict[str, OffAndOn]:
    """Per call of `calls` (by label), its times with the guard off, off again and on, from
    blocks in rounds of three, each round in another order."""
    measured = {label: OffAndOn([], []) for label, _, _ in calls}
    for index in range(rounds_of_blocks):
        times = {
            mode: _block("off" if mode == "again" else mode, calls, rounds) for mode in ORDERS[index % 6]
        }
        for position, both in enumerate(measured.values()):
            both.off.append(times["off"][position])
            both.again.append(times["again"][position])
            both.on.append(times["truncate"][position])
    return measured


def cut_twenty_megabytes(repeat: int) -> tuple[float, int]:
    """Best CPU seconds to decide and cut a 20 MB result to 25,000 tokens, and what it delivered."""
    measure = GuardTokenizer(TokenizerSpec("o200k_base"), max_bytes=32 << 20, wait_s=30.0).measure()
    results = Results(lambda: measure, ImageModel.ANTHROPIC)
    text = json_payload(20_000_000)
    result = {"content": [{"type": "text", "text": text}]}
    delivered: list[int] = []

    def cut() -> None:
        assessment = results.assess("tools/call", result, LIMIT)
        shaped = results.truncate(assessment, LIMIT, lambda tokens: f"[cut: {tokens:,} tokens delivered]")
        delivered.append(shaped.delivered)

    (seconds,) = best_cpu_seconds_each([cut], repeat)
    return seconds, delivered[-1]


def _row(label: str, both: OffAndOn, bound: float | None, how: str) -> list[str]:
    off, on = both.medians
    noise, low, high = both.noise()
    return [
        f"{label} result ({how})",
        f"{off * 1e3:.3f}",
        f"{on * 1e3:.3f}",
        f"{both.ratio:.3f}",
        f"{noise:.3f} ({low:.3f} .. {high:.3f})",
        "" if bound is None else f"<= {bound:g}: {both.verdict(bound)}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--triples", type=int, default=48, help="rounds of three blocks (guard off, off again, on)"
    )
    parser.add_argument("--rounds", type=int, default=40, help="rounds of the calls per block")
    parser.add_argument("--max-ratio", type=float, default=1.10, help="guard on / off median bound")
    parser.add_argument("--max-cut-s", type=float, default=0.5, help="CPU seconds bound of the 20 MB cut")
    parser.add_argument("--quick", action="store_true", help="a short run to check the benchmark works")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    triples, rounds, repeat = (2, 10, 1) if args.quick else (args.triples, args.rounds, 5)

    print(
        f"tools/call in memory, results under {LIMIT:,} tokens, {triples} rounds of three blocks "
        f"(off, off again, on) x {rounds} calls each; ratio: the median of the rounds' ratios"
    )
    sized = off_and_on(SIZED_OUT, triples, rounds)
    counted = off_and_on(COUNTED, triples, rounds)
    rows = [_row(label, both, args.max_ratio, "fits by size") for label, both in sized.items()]
    rows += [_row(label, both, None, "counted on both sides") for label, both in counted.items()]
    for row in rows:
        print(f"  {row[0]}: median off {row[1]} ms, on {row[2]} ms, ratio {row[3]}, A/A {row[4]} {row[5]}")
    seconds, delivered = cut_twenty_megabytes(repeat)
    print(
        f"20 MB result cut to {LIMIT:,} tokens: {seconds * 1e3:.1f} ms CPU (best of {repeat}), "
        f"{delivered:,} delivered"
    )
    failed = [
        f"guard on / off ratio {both.ratio:.3f} > {args.max_ratio} ({label} result)"
        for label, both in sized.items()
        if both.verdict(args.max_ratio) == "over"
    ]
    for label, both in sized.items():
        if both.verdict(args.max_ratio) == "unresolved":
            print(
                f"unresolved: {label} ratio {both.ratio:.3f}, but two blocks of the guard off differ as much"
            )
    if seconds > args.max_cut_s or delivered > LIMIT:
        failed.append(f"20 MB cut took {seconds:.3f} s (bound {args.max_cut_s} s), delivered {delivered}")
    for failure in failed:
        print("FAILED:", failure)
    if args.markdown:
        body = (
            table(
                [
                    "tools/call in memory",
                    "median off ms",
                    "median on ms",
                    "ratio (median of rounds)",
                    "A/A off/off (90%)",
                    "bound",
                ],
                rows,
            )
            + f"\n\nA 20 MB result cut to {LIMIT:,} tokens: {seconds * 1e3:.1f} ms of CPU (best of {repeat};"
            f" bound {args.max_cut_s * 1e3:g} ms), {delivered:,} tokens delivered."
        )
        write_section(args.markdown, "guard", body, "tests.bench.guard", argv)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
