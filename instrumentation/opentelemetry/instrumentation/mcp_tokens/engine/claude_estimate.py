# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The calibrated estimate of Claude tokens, for when ctok cannot load (or gives up).

The exact counter needs ctok, an optional extra on Python >= 3.12. Elsewhere a `claude-*`
encoding still counts in Claude's units: the content-aware estimate of `estimate.py` (a
weight per pair of adjacent character classes), with weights fitted against ctok's exact
counts of the same training corpus (`python -m tests.unit.estimate_fit --encoding
claude-4.7` in `.venv-claude`). Its error per content type, measured on the validation
corpus, is in docs/telemetry.md ("Which tokenizer") and held by tests/unit/test_claude.py.
Counts are flagged `exact=False`.
"""

from __future__ import annotations

from .claude_names import claude_version, family_of
from .estimate import FeatureEstimate

# Tokens per occurrence of each feature (see estimate.FEATURES), per ctok family.
CLAUDE_FEATURE_WEIGHTS: dict[str, dict[str, float]] = {
    "v3": {
        "lower": 0.017,
        "upper": 0.052,
        "digit": 0.439,
        "punctuation": 0.185,
        "space": 0.207,
        "newline": 0.999,
        "tab": 0.809,
        "latin_ext": 0.659,
        "indic_symbol": 1.037,
        "kana": 0.799,
        "han": 1.043,
        "hangul": 1.274,
        "compat": 1.263,
        "astral": 1.500,
        "word_start": 0.767,
        "number_start": -0.058,
        "punctuation_start": 0.806,
        "camel_hump": 1.006,
        "upper_then_lower": 1.819,
        "upper_then_upper": 0.277,
        "letter_after_digit": 1.073,
        "digit_after_letter": -0.126,
        "indent_start": 1.382,
        "space_after_space": -0.229,
        "punctuation_after_space": 0.240,
        "space_after_punctuation": -0.261,
        "newline_after_punctuation": -0.976,
        "newline_after_whitespace": 2.973,
        "newline_after_newline": -0.919,
    },
    # v4.8 reads with the v4.7 vocabulary.
    "v4.7": {
        "lower": 0.094,
        "upper": 0.052,
        "digit": 0.441,
        "punctuation": 0.353,
        "space": 0.347,
        "newline": 1.012,
        "tab": 0.977,
        "latin_ext": 0.650,
        "indic_symbol": 1.000,
        "kana": 0.797,
        "han": 1.043,
        "hangul": 1.236,
        "compat": 1.261,
        "astral": 1.500,
        "word_start": 0.850,
        "number_start": -0.153,
        "punctuation_start": 0.877,
        "camel_hump": 0.995,
        "upper_then_lower": 1.673,
        "upper_then_upper": 0.690,
        "letter_after_digit": 1.252,
        "digit_after_letter": -0.278,
        "indent_start": 0.888,
        "space_after_space": -0.394,
        "punctuation_after_space": 0.153,
        "space_after_punctuation": -0.617,
        "newline_after_punctuation": -0.966,
        "newline_after_whitespace": 2.917,
        "newline_after_newline": -0.911,
    },
}
_estimates: dict[str, FeatureEstimate] = {}


class ClaudeEstimateTokenizer:
    """Estimated Claude content tokens of one family (`exact` is False)."""

    exact = False
    chunkable = False
    max_token_bytes: int | None = None

    def __init__(self, name: str, family: str) -> None:
        self.name = name
        self.family = family
        weights = "v3" if family == "v3" else "v4.7"
        estimate = _estimates.get(weights)
        if estimate is None:
            estimate = _estimates[weights] = FeatureEstimate(CLAUDE_FEATURE_WEIGHTS[weights])
        self._estimate = estimate

    def count(self, text: str) -> int:
        return self._estimate.tokens(text)

    def estimate(self, text: str) -> int:
        return self._estimate.tokens(text)


def claude_estimate(encoding: str) -> ClaudeEstimateTokenizer:
    """The estimate for a Claude encoding name (ValueError if it is none)."""
    version = claude_version(encoding)
    if version is None:
        raise ValueError(f"{encoding!r} is not a Claude encoding")
    return ClaudeEstimateTokenizer(encoding.strip().lower(), family_of(version))
