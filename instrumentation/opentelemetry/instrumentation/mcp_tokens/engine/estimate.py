# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Content-aware token estimate, for when no exact tokenizer can load (and past the size cap).

Why not characters / 4: with o200k, JSON runs at about 3.2 characters per token, English
prose at 4-5, code at 4.3, CJK at 1.3-1.6 and base64 at 1.46, so any single ratio is off by
25-60% on some payloads. What drives the count is how o200k's pre-tokeniser cuts text into
pieces (a word with its leading space, a camelCase hump, up to three digits, a run of
punctuation, an indentation run) and how long each piece is.

The estimate approximates that with a weight for every pair of adjacent characters' classes
(16 classes: lower, upper, digit, space, newline, quote, punctuation, Han, kana, Hangul, ...).
A pair's weight is the sum of the named `FEATURE_WEIGHTS` it takes part in: "a letter after
a non-letter" starts a word piece, "an upper after a lower" starts a camelCase piece, "a
digit" is a third of a number piece, and so on. The weights are fitted by least squares
against exact o200k counts on a generated training corpus, and checked on a different
generated corpus (tests/unit/estimate_corpus.py, estimate_fit.py and test_estimate.py; the
error per content type is in docs/telemetry.md).

Cost: everything runs in C-level bytes and integer operations, a handful of passes over
the UTF-8 bytes, about 4 ms per MB. Inputs above `FULL_SCAN_CHARS` are estimated from
`SAMPLE_WINDOWS` evenly spaced windows and scaled up, so no input costs more than about
one megabyte's worth of work. Memory is a few copies of the scanned bytes.
"""

from __future__ import annotations

import zlib

# Character classes, one nibble each. Text is scanned as UTF-8 with continuation bytes
# dropped, so a non-ASCII character is classed by its lead byte, which is enough to tell
# the CJK blocks apart (E3 kana and CJK punctuation, E4-E9 Han, EA-ED Hangul).
NEWLINE, SPACE, TAB, LOWER, UPPER, DIGIT, QUOTE, PUNCT, APOSTROPHE = range(9)
LATIN_EXT, INDIC_SYMBOL, KANA, HAN, HANGUL, COMPAT, ASTRAL = range(9, 16)
N_CLASSES = 16

LETTERS = (LOWER, UPPER)
PUNCTUATION = (QUOTE, PUNCT, APOSTROPHE)
ALL_CLASSES = tuple(range(N_CLASSES))

# Every named feature is a set of (class, previous class) pairs; a text's feature value is
# how many of its characters, paired with the one before, fall in that set. The first
# character counts as following a NEWLINE.
Pairs = frozenset[tuple[int, int]]


def _count(*classes: int) -> Pairs:
    return frozenset((cls, prev) for cls in classes for prev in ALL_CLASSES)


def _run_start(*classes: int) -> Pairs:
    return frozenset((cls, prev) for cls in classes for prev in ALL_CLASSES if prev not in classes)


def _after(classes: tuple[int, ...], previous: tuple[int, ...]) -> Pairs:
    return frozenset((cls, prev) for cls in classes for prev in previous)


FEATURES: dict[str, Pairs] = {
    "lower": _count(LOWER),
    "upper": _count(UPPER),
    "digit": _count(DIGIT),
    "punctuation": _count(*PUNCTUATION),
    "space": _count(SPACE),
    "newline": _count(NEWLINE),
    "tab": _count(TAB),
    "latin_ext": _count(LATIN_EXT),
    "indic_symbol": _count(INDIC_SYMBOL),
    "kana": _count(KANA),
    "han": _count(HAN),
    "hangul": _count(HANGUL),
    "compat": _count(COMPAT),
    "astral": _count(ASTRAL),
    "word_start": _run_start(*LETTERS),
    "number_start": _run_start(DIGIT),
    "punctuation_start": _run_start(*PUNCTUATION),
    "camel_hump": _after((UPPER,), (LOWER,)),
    "upper_then_lower": _after((LOWER,), (UPPER,)),
    "upper_then_upper": _after((UPPER,), (UPPER,)),
    "letter_after_digit": _after(LETTERS, (DIGIT,)),
    "digit_after_letter": _after((DIGIT,), LETTERS),
    "indent_start": _after((SPACE,), (NEWLINE,)),
    "space_after_space": _after((SPACE,), (SPACE,)),
    "punctuation_after_space": _after(PUNCTUATION, (SPACE,)),
    "space_after_punctuation": _after((SPACE,), PUNCTUATION),
    # o200k folds a newline into the piece before it when that piece is punctuation
    # (",\n"), whitespace ("  \n") or newlines ("\n\n"); after a word it is a token.
    "newline_after_punctuation": _after((NEWLINE,), PUNCTUATION),
    "newline_after_whitespace": _after((NEWLINE,), (SPACE, TAB)),
    "newline_after_newline": _after((NEWLINE,), (NEWLINE,)),
}

# Tokens per occurrence of each feature, fitted on the training corpus (see the module
# docstring). Regenerate with `python -m tests.unit.estimate_fit`.
FEATURE_WEIGHTS: dict[str, float] = {
    "lower": 0.028,
    "upper": 0.052,
    "digit": 0.412,
    "punctuation": 0.204,
    "space": 0.064,
    "newline": 0.950,
    "tab": 0.263,
    "latin_ext": 0.600,
    "indic_symbol": 0.958,
    "kana": 0.691,
    "han": 0.675,
    "hangul": 0.689,
    "compat": 0.700,
    "astral": 1.500,
    "word_start": 0.804,
    "number_start": 0.399,
    "punctuation_start": 0.374,
    "camel_hump": 1.004,
    "upper_then_lower": 0.682,
    "upper_then_upper": 0.248,
    "letter_after_digit": 0.674,
    "digit_after_letter": -0.127,
    "indent_start": 1.265,
    "space_after_space": -0.043,
    "punctuation_after_space": 0.121,
    "space_after_punctuation": 0.222,
    "newline_after_punctuation": -1.018,
    "newline_after_whitespace": -0.178,
    "newline_after_newline": -0.938,
}

FULL_SCAN_CHARS = 1 << 20
SAMPLE_WINDOWS = 64
_WINDOW_CHARS = FULL_SCAN_CHARS // SAMPLE_WINDOWS

# Pair weights are stored as bytes in 1/_SCALE token steps, so that one bytes.translate
# turns pair codes into weights; the largest storable weight is 255 / _SCALE, ~2 tokens.
# A byte sum is then zlib.adler32's low half (1 + sum of bytes, mod 65521), taken over
# chunks small enough never to wrap (`FeatureEstimate._sum_chunk`).
_SCALE = 128


# (exclusive upper bound of the UTF-8 lead byte, class); continuation bytes are dropped
# before classing, so 0x80-0xBF never reach this table.
_LEAD_BYTE_CLASSES = (
    (0xE0, LATIN_EXT),
    (0xE3, INDIC_SYMBOL),
    (0xE4, KANA),
    (0xEA, HAN),
    (0xEE, HANGUL),
    (0xF0, COMPAT),
)


def _class_of_byte(byte: int) -> int:
    if byte in (0x0A, 0x0D):
        return NEWLINE
    if byte == 0x20:
        return SPACE
    if byte in (0x09, 0x0B, 0x0C):
        return TAB
    if 0x61 <= byte <= 0x7A:
        return LOWER
    if 0x41 <= byte <= 0x5A:
        return UPPER
    if 0x30 <= byte <= 0x39:
        return DIGIT
    if byte == 0x22:
        return QUOTE
    if byte == 0x27:
        return APOSTROPHE
    if byte < 0x80:
        return PUNCT
    for lead_limit, cls in _LEAD_BYTE_CLASSES:
        if byte < lead_limit:
            return cls
    return ASTRAL


# Each byte becomes 16 * its class; see `pair_codes`.
_CLASS_TIMES_16 = bytes(16 * _class_of_byte(b) for b in range(256))
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


def pair_weights(weights: dict[str, float] | None = None) -> list[float]:
    """Weight of each pair code `16 * class + previous class`, summed over the features."""
    weights = FEATURE_WEIGHTS if weights is None else weights
    table = [0.0] * (N_CLASSES * N_CLASSES)
    for name, pairs in FEATURES.items():
        for cls, prev in pairs:
            table[cls * N_CLASSES + prev] += weights[name]
    return table


def _pair_weight_bytes(table: list[float]) -> tuple[bytes, float]:
    """The table as bytes, and the per-character offset to subtract after summing them.

    No pair weighs less than zero, so appending text never lowers an estimate and long
    runs of one character cannot drive it negative. The offset (under half a step) makes
    the commonest pair, a lower-case letter after another, exact: rounding it would bias
    prose by about 1%.
    """
    lower_after_lower = table[LOWER * N_CLASSES + LOWER]
    offset = round(lower_after_lower * _SCALE) / _SCALE - lower_after_lower
    stored = bytes(min(255, max(0, round((max(0.0, w) + offset) * _SCALE))) for w in table)
    return stored, offset


def pair_codes(text: str) -> bytes:
    """One byte per character, `16 * its class + the previous character's class`.

    The first character's previous class is NEWLINE: a text starts like a fresh line.
    """
    classes = text.encode("utf-8", "surrogatepass").translate(_CLASS_TIMES_16, _CONTINUATION_BYTES)
    # Read as a little-endian integer, byte i holds 16 * class_i. Multiplying by 17 adds a
    # copy shifted by four bits, which puts class_(i-1) in the low nibble of byte i; no
    # byte overflows because 16 * 15 + 15 = 255. The extra top byte (the last class) is
    # dropped.
    packed = int.from_bytes(classes, "little") * 17
    return packed.to_bytes(len(classes) + 1, "little")[:-1]


def _byte_sum(data: bytes, chunk: int) -> int:
    """Sum of `data`'s bytes; `chunk` is the largest length whose sum stays below 65521."""
    view = memoryview(data)
    adler = zlib.adler32
    chunks = range(0, len(data), chunk)
    return sum([adler(view[start : start + chunk]) & 0xFFFF for start in chunks]) - len(chunks)


class FeatureEstimate:
    """The estimate with one set of feature weights (o200k's by default, see `FEATURE_WEIGHTS`;
    other tokenizers' fitted weights live beside their tokenizers)."""

    def __init__(self, weights: dict[str, float] | None = None) -> None:
        self._pair_bytes, self._offset = _pair_weight_bytes(pair_weights(weights))
        self._sum_chunk = 65520 // max(1, *self._pair_bytes)

    def tokens(self, text: str) -> int:
        """Estimated tokens in `text`: 0 for "", else at least 1. Never raises."""
        if not text:
            return 0
        estimate = self._raw(text) if len(text) <= FULL_SCAN_CHARS else self._sampled(text)
        return max(1, round(estimate))

    def _raw(self, text: str) -> float:
        codes = pair_codes(text)
        weights = _byte_sum(codes.translate(self._pair_bytes), self._sum_chunk)
        return weights / _SCALE - self._offset * len(codes)

    def _sampled(self, text: str) -> float:
        # Evenly spaced windows see every region of a heterogeneous payload (a base64 blob in
        # the middle of JSON, say) in proportion to its size.
        stride = len(text) // SAMPLE_WINDOWS
        windows = [text[i * stride : i * stride + _WINDOW_CHARS] for i in range(SAMPLE_WINDOWS)]
        sampled = sum(len(w) for w in windows)
        return sum(self._raw(w) for w in windows) * len(text) / sampled


_DEFAULT = FeatureEstimate()


def estimate_tokens(text: str) -> int:
    """Estimated o200k_base tokens in `text`: 0 for "", else at least 1. Never raises."""
    return _DEFAULT.tokens(text)


class EstimateInstead(Exception):
    """An exact tokenizer gave up on a text (past its work budget): estimate it instead."""


class EstimateTokenizer:
    """A `Tokenizer` that estimates (`exact` is False); used when no exact one can load."""

    name: str = "estimate"
    exact: bool = False

    def count(self, text: str) -> int:
        return estimate_tokens(text)
