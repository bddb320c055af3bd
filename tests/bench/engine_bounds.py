# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Cost bounds of the engine's parts: `python -m tests.bench.engine_bounds` (in `make bench`).

Each row times one piece of the engine on an input chosen to expose a fall back to
per-character Python or to work that grows faster than the input, and checks it against
a bound (best process CPU time of several runs, the runs of a row taking turns, so that
a slow spell of the machine hits them alike). The unit tests check what these parts
return; this checks what they cost. Exits 1 when a bound is missed.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.instrumentation.mcp_tokens.engine import blocks
from opentelemetry.instrumentation.mcp_tokens.engine.chunking import chunk_cuts
from opentelemetry.instrumentation.mcp_tokens.engine.content import classify
from opentelemetry.instrumentation.mcp_tokens.engine.estimate import estimate_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.images import image_size_from_base64
from opentelemetry.instrumentation.mcp_tokens.engine.overhead import find_overhead
from opentelemetry.instrumentation.mcp_tokens.engine.padding import detect_padding
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter,
    TokenizerSpec,
    load_tokenizer,
)
from PIL import Image

from tests.bench._doc import add_markdown_option, table, write_section
from tests.bench._timing import best_cpu_seconds_each
from tests.corpora import structured
from tests.corpora import text as corpus_text


@dataclass
class Check:
    name: str
    measured: float
    bound: float
    unit: str
    # True: the measured value must stay at or below the bound; False: at or above it.
    at_most: bool = True

    @property
    def ok(self) -> bool:
        return self.measured <= self.bound if self.at_most else self.measured >= self.bound

    def row(self) -> list[str]:
        relation = "<=" if self.at_most else ">="
        return [
            self.name,
            f"{self.measured:.3g} {self.unit}",
            f"{relation} {self.bound:g} {self.unit}",
            "ok" if self.ok else "MISSED",
        ]


def seconds(*runs: Callable[[], object], repeat: int = 5) -> list[float]:
    return best_cpu_seconds_each(list(runs), repeat)


def padding_checks(counter: TokenCounter) -> list[Check]:
    checks = []
    for label, text in (("'a' x 1M", "a" * 1_000_000), ("U+200B x 1M", "\u200b" * 1_000_000)):
        [cost] = seconds(lambda text=text: detect_padding(text, tokens=len(text)))  # type: ignore[misc]
        checks.append(Check(f"padding detection, {label}", 1000 * cost, 200, "ms"))
    for records in (3, 150, 3000):  # about 1 KB, 50 KB, 1 MB of JSON records
        text = structured.json_records(random.Random(records), records)
        padding, counting = seconds(
            lambda text=text: detect_padding(text, tokens=len(text) // 3),  # type: ignore[misc]
            lambda text=text: counter.count(text),  # type: ignore[misc]
            repeat=30 if records < 1000 else 5,
        )
        checks.append(
            Check(f"padding / counting, JSON of {len(text):,} chars", padding / counting, 0.15, "x")
        )
    rng = random.Random(11)
    scaled: dict[str, Callable[[int], str]] = {
        "prose": lambda n: corpus_text.english_prose(rng, n),
        "emoji": lambda n: corpus_text.emoji_reactions(rng, n // 5),
        "persian": lambda n: corpus_text.language_prose(rng, "fa", n),
        "astral": lambda n: "".join(chr(0x10000 + (i * 104729) % 0xFFFFF) for i in range(n)),
    }
    for kind, make in scaled.items():
        small, large = make(25_000), make(200_000)
        small_s, large_s = seconds(
            lambda: detect_padding(small),  # noqa: B023 -- called at once
            lambda: detect_padding(large),  # noqa: B023
            repeat=3,
        )
        checks.append(Check(f"padding detection, 8x the {kind} input", large_s / small_s, 8 * 1.6, "x time"))
    return checks


def overhead_check(counter: TokenCounter) -> Check:
    records = [{"id": i, "text": f"line {i} of the report"} for i in range(25_000)]
    pretty = json.dumps(records, indent=1)
    payload_blocks = list(blocks.tool_result_blocks({"content": [{"type": "text", "text": pretty}]}))
    tokens = counter.count(pretty).tokens
    formatting, counting = seconds(  # the counter caches nothing: every run counts
        lambda: find_overhead(payload_blocks, [tokens], lambda text: counter.count(text).tokens),
        lambda: counter.count(pretty),
        repeat=3,
    )
    return Check("formatting overhead / counting, 1 MB pretty JSON", formatting / counting, 0.5, "x")


def text_checks() -> list[Check]:
    json_text = '{"id": 12345, "name": "alpha beta", "tags": ["x", "y"], "v": 0.125}\n'
    megabyte = (json_text * (1_000_000 // len(json_text) + 1))[:1_000_000]
    [estimate_s] = seconds(lambda: estimate_tokens(megabyte))
    indented = '[{"id": 1, "name": "x"},\n' * 800_000 + "]\n"  # 20 MB: a bounded head and tail are read
    [classify_s] = seconds(lambda: classify(indented), repeat=3)
    payload = (json_text * 60_000)[: 4 << 20]
    [cuts_s] = seconds(lambda: chunk_cuts(payload, 1 << 16), repeat=3)
    hostile_inputs = {
        "letter": "a" * 5_000_000,
        "zero-width space": "\u200b" * 5_000_000,
        "lone surrogate": "\ud800" * 2_000_000,
        "emoji": "🎉" * 2_000_000,
        "NUL and newline": "\x00\n" * 3_000_000,
    }
    hostile_s = seconds(
        *(lambda text=text: estimate_tokens(text) for text in hostile_inputs.values()),  # type: ignore[misc]
        repeat=1,
    )
    checks = [
        Check("estimate, 1 MB of JSON", 1 / estimate_s, 40, "MB/s", at_most=False),
        *(
            Check(f"estimate, {len(text) / 1e6:.0f} M {label} characters", cost, 0.5, "s")
            for (label, text), cost in zip(hostile_inputs.items(), hostile_s, strict=True)
        ),
        Check("classify, 20 MB of indented JSON", 1000 * classify_s, 5, "ms"),
        Check("chunk cuts, 4 MB of JSON lines", 1000 * cuts_s, 500, "ms"),
    ]
    for label, hostile in (
        ("'a'", "a" * (2 << 20)),
        ("spaces", " " * (2 << 20)),
        ("combining", "!a\u0301" * (1 << 19)),
    ):
        [cost] = seconds(lambda hostile=hostile: chunk_cuts(hostile, 1 << 16), repeat=2)  # type: ignore[misc]
        checks.append(Check(f"chunk cuts, 2 Mi {label} (no cut)", cost, 3, "s"))
    return checks


def image_checks() -> list[Check]:
    """Reading a 20 MB base64 image's size decodes a few windows, never the whole image."""
    side = 2600  # 2600 x 2600 x 3 = 20.3 MB of pixels
    photo = Image.frombytes("RGB", (side, side), random.Random(3).randbytes(side * side * 3))
    checks = []
    for name, options in (("BMP", {}), ("PNG", {"compress_level": 0})):
        out = io.BytesIO()
        photo.save(out, name, **options)
        data = out.getvalue()
        text, wrapped = base64.b64encode(data).decode(), base64.encodebytes(data).decode()
        plain, lines, decode = seconds(
            lambda: image_size_from_base64(text),  # noqa: B023 -- called at once
            lambda: image_size_from_base64(wrapped),  # noqa: B023
            lambda: base64.b64decode(text),  # noqa: B023
            repeat=3,
        )
        ours = max(plain, lines)
        checks.append(Check(f"image size, 20 MB {name} in base64", 1000 * ours, 5, "ms"))
        checks.append(Check(f"image size / full decode, 20 MB {name}", ours / decode, 0.1, "x"))
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    counter = TokenCounter(load_tokenizer(TokenizerSpec("o200k_base")), cache_entries=0)
    checks = [*padding_checks(counter), overhead_check(counter), *text_checks(), *image_checks()]
    rendered = table(
        ["check", "measured", "bound", "ok"], [check.row() for check in checks], [False, True, True, False]
    )
    print("engine cost bounds (best process CPU time of several runs)\n")
    print(rendered)
    if args.markdown:
        write_section(args.markdown, "engine-bounds", rendered, "tests.bench.engine_bounds", argv)
    missed = [check.name for check in checks if not check.ok]
    if missed:
        print("\nBOUNDS NOT MET:\n  " + "\n  ".join(missed))
        return 1
    print("\nall bounds hold")
    return 0


if __name__ == "__main__":
    sys.exit(main())
