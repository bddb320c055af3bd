# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Token engine benchmark: `python -m tests.bench.engine` (or `make bench`).

Prints, from one run, the ratios the token-engine issue asks for:
- exact counting (TokenCounter.count) against raw tiktoken `encode_ordinary` on the same
  JSON text, for 1 KB, 50 KB, 1 MB and 20 MB (must be <= 1.15x);
- padding analysis on top of counting (must add <= 15%);
- pathological inputs: 1M of one repeated character and 1M zero-width spaces through
  count + padding, against raw tiktoken on the same text (must be <= 1.15x: the analysis
  adds nothing that grows worse than the tokenizer on them);
- padding detection alone, per content type (JSON, prose, code, logs, CJK, RTL and Indic
  scripts, emoji, adversarial pads), in MB of UTF-8 per CPU second, and its CPU time against
  raw tiktoken's on the same text (must be <= 0.5x: detection stays a minor addition to the
  count whatever the script);
- the cache's hit path.
Every bound is a ratio to tiktoken measured beside it in the same run: the shared machines
this runs on change speed by 2x within an hour, which an absolute MB/s floor would report as
a regression. Timings are medians of interleaved repetitions (or best CPU times taken in
turns), so both sides see the same machine noise.
Exits non-zero when a bound does not hold.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.content import classify
from opentelemetry.instrumentation.mcp_tokens.engine.padding import detect_padding
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter,
    TokenizerSpec,
    load_bundled_encoding,
    load_tokenizer,
)

from tests.bench._doc import add_markdown_option, table, write_section
from tests.bench._timing import best_cpu_seconds_each
from tests.corpora.padding import throughput_inputs

SIZES = {"1 KB": 1_000, "50 KB": 50_000, "1 MB": 1_000_000, "20 MB": 20_000_000}
COUNT_BOUND = 1.15
PADDING_BOUND = 0.15
PATHOLOGICAL_BOUND = 1.15
PADDING_ALONE_BOUND = 0.5


def json_payload(size: int, seed: int = 7) -> str:
    """API-like JSON records of about `size` characters."""
    rng = random.Random(seed)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "status",
        "pending",
        "shipped",
        "customer",
        "order",
        "invoice",
        "total",
        "region",
    ]
    records: list[dict[str, object]] = []
    length = 2
    while length < size:
        record = {
            "id": rng.randrange(10**9),
            "name": " ".join(rng.choice(words) for _ in range(3)),
            "email": f"user{rng.randrange(10**6)}@example.com",
            "amount": round(rng.random() * 1000, 2),
            "tags": rng.sample(words, 3),
            "active": rng.random() < 0.5,
        }
        records.append(record)
        length += len(json.dumps(record)) + 2
    return json.dumps(records)[:size] if size < 200 else json.dumps(records)


def median_time(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def interleaved(a: Callable[[], object], b: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median times of a and b, measured alternately."""
    times_a, times_b = [], []
    for _ in range(repeat):
        times_a.append(median_time(a, 1))
        times_b.append(median_time(b, 1))
    return statistics.median(times_a), statistics.median(times_b)


def repeats_for(size: int) -> int:
    return 200 if size <= 1_000 else 40 if size <= 50_000 else 9 if size <= 1_000_000 else 3


Row = list[str]


def measure_counting(
    label: str, text: str, encoding: Any, counter: TokenCounter, rows: list[Row]
) -> list[str]:
    """Print one row of the counting table (and add its rows to `rows`); return the bounds it breaks."""
    tokens = counter.count(text).tokens
    if tokens != len(encoding.encode_ordinary(text)):
        return [f"counting {label}: count differs from tiktoken"]
    repeat = repeats_for(len(text))
    raw, ours = interleaved(lambda: encoding.encode_ordinary(text), lambda: counter.count(text), repeat)
    kind = classify(text)
    padding = median_time(lambda: detect_padding(text, tokens=tokens, content_type=kind), repeat)
    ratio, share = ours / raw, padding / ours
    print(f"{label:>8} {raw * 1e3:9.3f} {ours * 1e3:9.3f} {ratio:6.2f} {padding * 1e3:12.3f} {share:7.1%}")
    rows.append(
        [
            f"exact count / tiktoken, {label} JSON",
            f"{ours * 1e3:.3f} / {raw * 1e3:.3f} ms = {ratio:.2f}x",
            f"<= {COUNT_BOUND}x",
            _ok(ratio <= COUNT_BOUND),
        ]
    )
    rows.append(
        [
            f"padding analysis on top, {label} JSON",
            f"{padding * 1e3:.3f} ms = {share:.1%}",
            f"<= {PADDING_BOUND:.0%}",
            _ok(share <= PADDING_BOUND),
        ]
    )
    failures = []
    if ratio > COUNT_BOUND:
        failures.append(f"counting {label}: {ratio:.2f}x > {COUNT_BOUND}x")
    if share > PADDING_BOUND:
        failures.append(f"padding {label}: +{share:.1%} > {PADDING_BOUND:.0%}")
    return failures


def _ok(held: bool) -> str:
    return "ok" if held else "MISSED"


def measure_pathological(
    label: str, text: str, encoding: Any, counter: TokenCounter, rows: list[Row]
) -> list[str]:
    """Count + padding analysis of one degenerate text against raw tiktoken, interleaved."""
    tokens = counter.count(text).tokens
    kind = classify(text)
    findings = detect_padding(text, tokens=tokens, content_type=kind)

    def analyse() -> None:
        detect_padding(text, tokens=counter.count(text).tokens, content_type=classify(text))

    raw, ours = interleaved(lambda: encoding.encode_ordinary(text), analyse, 5)
    ratio = ours / raw
    reasons = ",".join(sorted({f.reason.value for f in findings})) or "none"
    print(
        f"  {label:<12} {ours:6.3f} s / {raw:6.3f} s = {ratio:.2f}x  {tokens:>8} tokens  findings: {reasons}"
    )
    rows.append(
        [
            f"count + padding analysis / tiktoken, {label}",
            f"{ours:.3f} / {raw:.3f} s = {ratio:.2f}x ({reasons})",
            f"<= {PATHOLOGICAL_BOUND}x",
            _ok(ratio <= PATHOLOGICAL_BOUND),
        ]
    )
    return [f"{label}: {ratio:.2f}x > {PATHOLOGICAL_BOUND}x"] if ratio > PATHOLOGICAL_BOUND else []


def measure_padding_throughput(encoding: Any, repeat: int, rows: list[Row]) -> list[str]:
    """Print padding detection's rate per input type, and its CPU time against tiktoken's on
    the same text; return the bounds it breaks."""
    inputs = throughput_inputs()
    print(f"\npadding detection alone, best CPU time of {repeat} (bound <= {PADDING_ALONE_BOUND}x tiktoken)")
    failures = []
    for name, text in inputs.items():
        detection, tokenizer = best_cpu_seconds_each(
            [
                functools.partial(detect_padding, text, tokens=len(text) // 4),
                functools.partial(encoding.encode_ordinary, text),
            ],
            repeat,
        )
        megabytes = len(text.encode("utf-8", "surrogatepass")) / 1e6
        rate, ratio = megabytes / detection, detection / tokenizer
        print(
            f"  {name:<22} {megabytes:5.2f} MB {rate:6.0f} MB/s  {ratio:5.3f}x tiktoken"
            f" ({megabytes / tokenizer:.1f} MB/s)"
        )
        rows.append(
            [
                f"padding detection alone, {name} ({megabytes:.2f} MB)",
                f"{rate:.0f} MB/s = {ratio:.3f}x tiktoken",
                f"<= {PADDING_ALONE_BOUND}x",
                _ok(ratio <= PADDING_ALONE_BOUND),
            ]
        )
        if ratio > PADDING_ALONE_BOUND:
            failures.append(f"padding {name}: {ratio:.3f}x > {PADDING_ALONE_BOUND}x tiktoken")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encoding", default="o200k_base", choices=["o200k_base", "cl100k_base"])
    parser.add_argument("--skip-20mb", action="store_true", help="leave out the 20 MB case (quick runs)")
    add_markdown_option(parser)
    args = parser.parse_args(argv)

    encoding = load_bundled_encoding(args.encoding)
    # The cache is switched off for the ratio so each repetition really counts.
    counter = TokenCounter(load_tokenizer(TokenizerSpec(args.encoding)), cache_entries=0)
    failures: list[str] = []
    rows: list[Row] = []

    print(f"mcp-tokens engine benchmark ({args.encoding}); medians of interleaved runs\n")
    print(f"{'payload':>8} {'raw ms':>9} {'ours ms':>9} {'ratio':>6} {'+padding ms':>12} {'share':>7}")
    for label, size in SIZES.items():
        if not (args.skip_20mb and size > 1_000_000):
            failures += measure_counting(label, json_payload(size), encoding, counter, rows)

    print("\npathological inputs (count + padding analysis, against raw tiktoken)")
    for label, text in {"'a' x 1M": "a" * 1_000_000, "U+200B x 1M": "\u200b" * 1_000_000}.items():
        failures += measure_pathological(label, text, encoding, counter, rows)

    failures += measure_padding_throughput(encoding, 7, rows)

    cached = TokenCounter(load_tokenizer(TokenizerSpec(args.encoding)))
    definition = json.dumps({"name": "search_issues", "description": "Search issues. " * 40})
    cached.count(definition)
    hits = 100_000
    start = time.perf_counter()
    for _ in range(hits):
        cached.count(definition)
    hit_ns = (time.perf_counter() - start) / hits * 1e9
    miss = median_time(lambda: encoding.encode_ordinary(definition), 200)
    print(f"\ncache hit, {len(definition)}-char tool definition: {hit_ns:.0f} ns (miss: {miss * 1e6:.1f} µs)")
    rows.append(
        [
            f"count cache hit, {len(definition)}-char tool definition",
            f"{hit_ns:.0f} ns (miss {miss * 1e6:.1f} µs)",
            "",
            "",
        ]
    )
    if args.markdown:
        rendered = table(["check", "measured", "bound", "ok"], rows, [False, True, True, False])
        write_section(args.markdown, "engine", rendered, "tests.bench.engine", argv)

    if failures:
        print("\nBOUNDS NOT MET:\n  " + "\n  ".join(failures))
        return 1
    print("\nall bounds hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
