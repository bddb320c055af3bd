# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Fit the estimate's feature weights, and report its error and speed.

    python -m tests.unit.estimate_fit            # print FEATURE_WEIGHTS for engine/estimate.py
    python -m tests.unit.estimate_fit --report   # the error and throughput tables in docs/telemetry.md
    python -m tests.unit.estimate_fit --encoding claude-4.7 [--report]
                                                 # the same for a Claude family (needs ctok:
                                                 # .venv-claude); weights for engine/claude_estimate.py

The fit is ridge least squares on the relative error of every training document, each
content kind weighted equally, solved in pure Python (about 30 unknowns).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine import estimate
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding

from tests.unit.estimate_corpus import TRAIN, VALIDATION, corpus

# Prior guesses (tokens per occurrence) and how hard to hold each weight to its prior.
# A strength of 0 leaves the weight to the data; the rare classes (accented Latin, Indic
# and symbols, emoji, tabs) get firm priors because the training corpus holds few of them,
# and a free fit would chase noise there.
_PRIORS: dict[str, tuple[float, float]] = {
    "lower": (0.05, 0.05),
    "upper": (0.05, 1.0),  # ALL-CAPS words are single tokens in o200k; base64 shows up in transitions
    "digit": (0.33, 0.05),  # o200k splits numbers into pieces of up to three digits
    "punctuation": (0.3, 0.05),
    "space": (0.0, 0.05),
    "newline": (1.0, 1.0),
    "tab": (1.0, 1.0),
    "latin_ext": (0.6, 3.0),
    "indic_symbol": (1.0, 3.0),
    "kana": (0.8, 0.3),
    "han": (0.7, 0.3),
    "hangul": (0.7, 0.3),
    "compat": (0.8, 1.0),
    "astral": (1.5, 3.0),
    "word_start": (1.0, 0.05),
    "number_start": (0.5, 0.05),
    "punctuation_start": (0.7, 0.05),
    "camel_hump": (1.0, 1.0),  # each hump is its own pre-tokeniser piece
    "upper_then_lower": (0.0, 0.05),
    "upper_then_upper": (0.1, 0.05),
    "letter_after_digit": (0.3, 0.05),
    "digit_after_letter": (0.0, 0.05),
    "indent_start": (1.0, 0.05),
    "space_after_space": (0.0, 0.05),
    "punctuation_after_space": (0.0, 0.05),
    "space_after_punctuation": (0.0, 0.05),
    "newline_after_punctuation": (-1.0, 1.0),  # ",\n" is one piece
    "newline_after_whitespace": (-1.0, 1.0),  # "  \n" is one piece
    # "\n\n" is one piece; held so that a run of newlines still costs a little, never less
    # than nothing (see `estimate._pair_weight_bytes`).
    "newline_after_newline": (-0.9, 5.0),
}


def feature_values(text: str) -> dict[str, int]:
    """How often each of the estimator's features occurs in `text`."""
    codes = Counter(estimate.pair_codes(text))
    return {
        name: sum(codes[cls * estimate.N_CLASSES + prev] for cls, prev in pairs)
        for name, pairs in estimate.FEATURES.items()
    }


def fit_weights(documents: dict[str, list[str]], exact_counts: dict[str, list[int]]) -> dict[str, float]:
    """Feature weights by ridge least squares, pulling each towards its prior in `_PRIORS`.

    The pull on a weight is its strength times that feature's own magnitude in the data,
    so strengths compare across features that occur once per document or once per letter.
    """
    names = list(_PRIORS)
    rows: list[list[float]] = []
    targets: list[float] = []
    for kind, docs in documents.items():
        kind_weight = 1.0 / len(docs) ** 0.5
        for text, exact in zip(docs, exact_counts[kind], strict=True):
            scale = kind_weight / max(exact, 1)
            values = feature_values(text)
            rows.append([values[n] * scale for n in names])
            targets.append(exact * scale)
    size = len(names)
    normal = [[sum(r[i] * r[j] for r in rows) for j in range(size)] for i in range(size)]
    rhs = [sum(r[i] * t for r, t in zip(rows, targets, strict=True)) for i in range(size)]
    for i, name in enumerate(names):
        prior, strength = _PRIORS[name]
        # A feature the corpus never shows (magnitude 0) is simply held at its prior.
        penalty = strength**2 * normal[i][i] if normal[i][i] > 0 else 1.0
        normal[i][i] += penalty
        rhs[i] += penalty * prior
    return dict(zip(names, _solve(normal, rhs), strict=True))


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting."""
    size = len(rhs)
    a = [[*row, b] for row, b in zip(matrix, rhs, strict=True)]
    for col in range(size):
        pivot = max(range(col, size), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, size):
            factor = a[r][col] / a[col][col]
            for c in range(col, size + 1):
                a[r][c] -= factor * a[col][c]
    solution = [0.0] * size
    for r in reversed(range(size)):
        solution[r] = (a[r][size] - sum(a[r][c] * solution[c] for c in range(r + 1, size))) / a[r][r]
    return solution


def error_report(
    documents: dict[str, list[str]],
    encoding: Any,
    count: Callable[[str], int] | None = None,
    estimator: Callable[[str], int] = estimate.estimate_tokens,
) -> list[str]:
    """Markdown rows: per kind, the estimate's aggregate and per-document signed error
    (exact counts from `count`, default the o200k `encoding`)."""
    exact_count = count or (lambda text: len(encoding.encode_ordinary(text)))
    rows = [
        "| Content type | Documents | Exact tokens | Aggregate error | 90% of documents within | Worst |",
        "|---|---|---|---|---|---|",
    ]
    totals = [0, 0]
    for kind, docs in documents.items():
        exact = [exact_count(d) for d in docs]
        estimated = [estimator(d) for d in docs]
        errors = [100 * (e - x) / x for e, x in zip(estimated, exact, strict=True)]
        p90 = sorted(abs(e) for e in errors)[int(0.9 * (len(errors) - 1))]
        worst = max(errors, key=abs)
        aggregate = 100 * (sum(estimated) - sum(exact)) / sum(exact)
        rows.append(
            f"| {kind} | {len(docs)} | {sum(exact):,} | {aggregate:+.1f}% | ±{p90:.1f}% | {worst:+.1f}% |"
        )
        totals[0] += sum(estimated)
        totals[1] += sum(exact)
    aggregate = 100 * (totals[0] - totals[1]) / totals[1]
    rows.append(f"| all | {sum(map(len, documents.values()))} | {totals[1]:,} | {aggregate:+.1f}% | | |")
    return rows


def throughput_report(documents: dict[str, list[str]]) -> list[str]:
    """Markdown rows: MB/s of `estimate_tokens` per kind and size (best of 5 runs)."""
    sizes = (1_000, 50_000, 1_000_000, 20_000_000)
    rows = [
        "| Content type | " + " | ".join(f"{s:,} chars" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for kind in ("json_compact", "prose", "code", "cjk", "base64"):
        block = "\n".join(documents[kind])
        cells = []
        for size in sizes:
            text = (block * (size // len(block) + 1))[:size]
            best = float("inf")
            for _ in range(5):
                start = time.perf_counter()
                estimate.estimate_tokens(text)
                best = min(best, time.perf_counter() - start)
            cells.append(f"{len(text.encode('utf-8', 'surrogatepass')) / best / 1e6:,.0f} MB/s")
        rows.append(f"| {kind} | " + " | ".join(cells) + " |")
    return rows


def _exact_counter(name: str) -> Callable[[str], int]:
    if name.startswith("claude"):
        from opentelemetry.instrumentation.mcp_tokens.engine.claude import load_claude  # noqa: PLC0415

        return load_claude(name).count
    encoding = load_bundled_encoding(name)
    return lambda text: len(encoding.encode_ordinary(text))


def _estimator(name: str) -> Callable[[str], int]:
    if name.startswith("claude"):
        from opentelemetry.instrumentation.mcp_tokens.engine.claude_estimate import (  # noqa: PLC0415
            claude_estimate,
        )

        return claude_estimate(name).count
    return estimate.estimate_tokens


if __name__ == "__main__":
    name = sys.argv[sys.argv.index("--encoding") + 1] if "--encoding" in sys.argv else "o200k_base"
    exact_count = _exact_counter(name)
    if "--report" in sys.argv:
        validation = corpus(VALIDATION)
        print("\n".join(error_report(validation, None, exact_count, _estimator(name))))
        if name == "o200k_base":
            print()
            print("\n".join(throughput_report(validation)))
    else:
        training = corpus(TRAIN, per_kind=80)
        exact = {kind: [exact_count(d) for d in docs] for kind, docs in training.items()}
        for feature, weight in fit_weights(training, exact).items():
            print(f'    "{feature}": {weight:.3f},')
