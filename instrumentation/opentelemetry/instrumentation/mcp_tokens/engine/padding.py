# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Adversarial padding: content built to fill a model's context window with tokens that carry
no information (invisible characters, repeated phrases, whitespace, token-dense garbage,
one enormous line of prose).

`detect_padding(text, tokens=..., content_type=...)` returns at most one finding per reason,
the first place where that reason's threshold is crossed. Every detector is linear time and
uses only C-speed primitives over the text (str.isascii, bytes.translate, bytes.count, str.rfind,
bounded regex searches, zlib on sampled windows); Python loops run per window, never per
character. Thresholds were set on the corpora in `tests/corpora/padding.py` (benign maxima and
adversarial minima are quoted next to each constant) and checked against ~12,000 real files.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

from .content import ContentType, classify


class PaddingReason(str, Enum):
    INVISIBLE = "invisible"
    REPETITION = "repetition"
    LOW_DIVERSITY = "low_diversity"
    TOKEN_DENSITY = "token_density"
    LONG_LINE = "long_line"


# Not slotted: it crosses from the counting service to the application for every exchange,
# and a frozen slotted dataclass unpickles through Python-level __setstate__ (five times slower).
@dataclass(frozen=True)
class PaddingFinding:
    """One padding finding: why, where it starts (character offset in the block), how strong.

    `score` is per reason (see `detect_padding`); higher is stronger. `detail` is built from
    numbers and fixed words only, never from the payload.
    """

    reason: PaddingReason
    offset: int
    score: float
    block: int = 0
    detail: str = ""


# --- invisible characters -------------------------------------------------------------------
# Characters that render as nothing: Unicode format characters (Cf) except those that draw a
# glyph (VISIBLE_FORMAT_CHARACTERS); variation selectors; Mongolian selectors; Hangul fillers;
# Khmer inherent vowels; CGJ; and all of plane 14 (tags, variation selectors 17-256, and the
# rest, default-ignorable).
VISIBLE_FORMAT_CHARACTERS = "\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\U000110bd\U000110cd"
_BMP_INVISIBLE = (
    "\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb"
)
_SMP_INVISIBLE = "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
INVISIBLE_CHARACTERS = f"{_BMP_INVISIBLE}{_SMP_INVISIBLE}\U000e0000-\U000e0fff"
_EMOJI = (
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf"
    "\u2934\u2935\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
# Scripts whose orthography uses ZWJ/ZWNJ (Hebrew, Arabic, Persian, Syriac, Indic, Sinhala,
# Thai, Tibetan, Myanmar, Khmer, Mongolian) and those that may separate words with ZWSP.
_JOINING_SCRIPTS = (
    "\u0590-\u0dff\u0e00-\u0fff\u1000-\u109f\u1780-\u17b3\u17b6-\u17ff\u1820-\u18af\ufb1d-\ufdff\ufe70-\ufefc"
)
_WORD_BREAK_SCRIPTS = "\u0e00-\u0fff\u1000-\u109f\u1780-\u17b3\u17b6-\u17ff"
_VARIATION_SELECTORS = "\ufe00-\ufe0f\U000e0100-\U000e01ef"
# Marks with a typographic use but no context to check: soft hyphen, bidi marks, embeddings,
# overrides and isolates, word joiner, invisible math operators, CGJ. Listed one by one: they
# are counted with str.count, 19 C-speed passes being cheaper than a regex object per mark.
_SOFT_MARKS = (
    "\u00ad\u034f\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
    "\u2060\u2061\u2062\u2063\u2064\u2066\u2067\u2068\u2069"
)

# Counting avoids a Python object per invisible character: ZWNJ, ZWJ and VS16 (most of the
# invisibles in Persian, Indic and emoji text) are marked by str.replace, the other BMP ones by
# one regex over a BMP-only class (2-3x faster than one with astral ranges), and plane 14 is
# counted on the UTF-8 bytes, where its characters are exactly those starting F3 A0.
_OTHER_BMP_INVISIBLE = re.compile(
    "["
    + _BMP_INVISIBLE.replace("\u200b-\u200f", "\u200b\u200e\u200f").replace("\ufe00-\ufe0f", "\ufe00-\ufe0e")
    + "]"
)
_SMP_INVISIBLE_RE = re.compile(f"[{_SMP_INVISIBLE}]")
_SMP_INVISIBLE_UTF8 = re.compile(b"\xf0(?:\x93\x90[\xb0-\xbf]|\x9b\xb2[\xa0-\xa3]|\x9d\x85[\xb3-\xba])")
_NON_EMOJI_PLANE_1_UTF8 = re.compile(b"\xf0[^\x9f]")
_PLANE_14_UTF8 = b"\xf3\xa0"
_ANY_INVISIBLE = re.compile(f"[{INVISIBLE_CHARACTERS}]")
_ASCII_BYTES = bytes(range(128))
# Emoji put ZWJ between two emoji and VS15/VS16 after one (VS16 also before a keycap). These
# match only what emoji do NOT explain, so emoji text costs a scan, not an object per joiner;
# each starts with one literal character, which the regex engine finds fastest.
_EMOJI_MISUSE = (
    re.compile(f"\u200d(?:(?<![{_EMOJI}\ufe0f]\u200d)|(?![{_EMOJI}]))"),
    re.compile(f"\ufe0f(?<![{_EMOJI}]\ufe0f)(?!\u20e3)"),
    re.compile(f"\ufe0e(?<![{_EMOJI}]\ufe0e)"),
)
# Script conventions: joiners after their scripts, ZWSP after scripts without spaces, a
# variation selector after a visible character, Mongolian selectors after Mongolian.
_SCRIPT_USE = re.compile(
    f"[\u200b-\u200d\u180b-\u180f{_VARIATION_SELECTORS}](?:"
    f"(?<=[{_JOINING_SCRIPTS}][\u200c\u200d])"
    f"|(?<=[{_WORD_BREAK_SCRIPTS}]\u200b)"
    f"|(?<=[^{INVISIBLE_CHARACTERS}{_EMOJI}][{_VARIATION_SELECTORS}])"
    f"|(?<=[\u1820-\u18af][\u180b-\u180f]))"
)
INVISIBLE_WINDOW_CHARS = 16384
# Longest legitimate run: a subdivision flag's 5 tag letters + cancel tag, or VS16 + ZWJ.
INVISIBLE_MIN_RUN = 10
_INVISIBLE_RUN = re.compile(f"[{INVISIBLE_CHARACTERS}]{{{INVISIBLE_MIN_RUN},}}")
_PLANE_14_RUN = re.compile(b"\xf3\xa0..(?:\xf3\xa0..){%d}" % (INVISIBLE_MIN_RUN - 1), re.DOTALL)
# A subdivision flag (England, Scotland, Wales) spells its region in at most 7 tag characters
# after U+1F3F4 (5 letters and the cancel tag, with room for longer region codes).
_TAGS_PER_FLAG = 7
# Suspicious invisibles per window character. Benign corpus: 0 (LRM/RLM, ZWNJ, emoji ZWJ and
# flags are all legitimate); adversarial: >= 0.25 (bidi overrides around every word) up to 1.0.
INVISIBLE_MIN_FRACTION = 0.05
INVISIBLE_MIN_COUNT = 32
# Legitimate marks stop being legitimate past a density no real text reaches. Script
# conventions: our Persian has 3% ZWNJ; Khmer that puts ZWSP between all words would reach an
# estimated 15%. Soft marks: a bidi mark or a soft hyphen here and there. Sprinkled after
# every letter, either is ~50%.
SCRIPT_MARKS_MAX_FRACTION = 0.30
SOFT_MARKS_MAX_FRACTION = 0.10


@dataclass(frozen=True, slots=True)
class _Marks:
    """The invisible characters of one window, counted without a Python object per character."""

    encoded: bytes  # the UTF-8 of `text`
    text: str  # the window, or only its non-ASCII characters when ASCII dominates
    marked: str  # `text` with each BMP invisible replaced by NUL
    joiners: int  # ZWJ, VS15 and VS16: what emoji may explain
    plane_14: int  # tags, variation selectors 17-256 and the rest of plane 14
    flag_tags: int  # plane-14 characters that subdivision flags (U+1F3F4 + tags) can explain
    smp: int  # the rare invisible format characters of plane 1
    total: int

    @classmethod
    def of(cls, window: str) -> _Marks:
        encoded = window.encode("utf-8", "replace")
        text = window
        if 3 * len(encoded) < 4 * len(window):
            # Mostly ASCII, which is never invisible: drop it at C speed so the regexes below
            # scan a fraction of the window. Neighbours then skip over ASCII, a small blur.
            # Dropping costs about a nanosecond per byte and the regexes save about four per
            # character dropped, so it pays only when ASCII is at least ~70% of the window
            # (Persian or Hebrew prose, ~20% ASCII, is scanned whole).
            encoded = encoded.translate(None, _ASCII_BYTES)
            text = encoded.decode("utf-8", "replace")
        # NUL marks an invisible character; NULs already in the text are not counted.
        nuls = text.count("\0") if "\0" in text else 0
        marked = text
        for joiner in ("\u200d", "\ufe0f"):  # emoji's invisibles first, to count them on the way
            if joiner in marked:
                marked = marked.replace(joiner, "\0")
        joiners = marked.count("\0") - nuls + text.count("\ufe0e")
        if "\u200c" in marked:
            marked = marked.replace("\u200c", "\0")
        marked = _OTHER_BMP_INVISIBLE.sub("\0", marked)
        plane_14 = flag_tags = smp = 0
        # Single-byte membership is a memchr: most windows stop there.
        if b"\xf3" in encoded:
            plane_14 = encoded.count(_PLANE_14_UTF8)
            flag_tags = min(plane_14, _TAGS_PER_FLAG * text.count("\U0001f3f4"))
        # Emoji, the usual 4-byte characters, all start F0 9F: only other ones need a look.
        if (
            b"\xf0" in encoded
            and _NON_EMOJI_PLANE_1_UTF8.search(encoded)
            and _SMP_INVISIBLE_UTF8.search(encoded)
        ):
            smp = len(_SMP_INVISIBLE_RE.findall(text))
        total = marked.count("\0") - nuls + plane_14 + smp
        return cls(encoded, text, marked, joiners, plane_14, flag_tags, smp, total)

    def may_have_run(self) -> bool:
        # A run in the window is also a run in `text`, which at most lacks ASCII.
        if "\0" * INVISIBLE_MIN_RUN in self.marked or self.smp >= INVISIBLE_MIN_RUN:
            return True
        if self.plane_14 < INVISIBLE_MIN_RUN or self.plane_14 == self.flag_tags:
            return False
        return _PLANE_14_RUN.search(self.encoded) is not None

    def suspicious(self, window_chars: int) -> int:
        """Invisibles that neither emoji, flags nor (at a plausible density) writing explain."""
        text = self.text
        emoji = self.joiners - sum(
            len(misuse.findall(text)) for misuse in _EMOJI_MISUSE if misuse.pattern[0] in text
        )
        suspicious = self.total - emoji - self.flag_tags
        if suspicious < _min_suspicious(window_chars):
            return max(suspicious, 0)  # already below the bar: spare the other regexes
        script = len(_SCRIPT_USE.findall(text))
        soft = sum(text.count(mark) for mark in _SOFT_MARKS)
        for explained, max_fraction in ((script, SCRIPT_MARKS_MAX_FRACTION), (soft, SOFT_MARKS_MAX_FRACTION)):
            if explained <= max_fraction * window_chars:
                suspicious -= explained
        return max(suspicious, 0)


def _min_suspicious(window_chars: int) -> float:
    return max(INVISIBLE_MIN_COUNT, INVISIBLE_MIN_FRACTION * window_chars)


def _invisible(text: str) -> PaddingFinding | None:
    if text.isascii():
        return None
    for start in range(0, len(text), INVISIBLE_WINDOW_CHARS):
        window = text[start : start + INVISIBLE_WINDOW_CHARS]
        if not window.isascii():
            finding = _invisible_in_window(window, start)
            if finding is not None:
                return finding
    return None


def _invisible_in_window(window: str, start: int) -> PaddingFinding | None:
    marks = _Marks.of(window)
    if marks.total < INVISIBLE_MIN_RUN:
        return None
    size = len(window)
    run = _INVISIBLE_RUN.search(window) if marks.may_have_run() else None
    if run is not None:
        detail = f"{run.end() - run.start()} consecutive invisible characters"
        score = marks.suspicious(size) / size
        return PaddingFinding(PaddingReason.INVISIBLE, start + run.start(), score, detail=detail)
    if marks.total < _min_suspicious(size):
        return None
    suspicious = marks.suspicious(size)
    if suspicious < _min_suspicious(size):
        return None
    # Dense enough to fire, so the first invisible character is near (usually at) the pad's start.
    first = _ANY_INVISIBLE.search(window)
    offset = start + (first.start() if first else 0)
    detail = f"{suspicious} of {size} characters are invisible"
    return PaddingFinding(PaddingReason.INVISIBLE, offset, suspicious / size, detail=detail)


# --- repetition and low diversity, on sampled windows of the UTF-8 bytes ----------------------
# A 6 KiB sample every 20 KiB: 30% of the bytes are compressed (zlib is the costliest step),
# and any pad of at least STRIDE + SAMPLE - 1 bytes (26 KiB) contains a whole sample. One zlib
# stream runs through all the samples, so a sample also matches the previous ones (32 KiB of
# history): a period longer than a sample (a repeated 4 KB paragraph) still compresses to
# nothing from the second sample on.
SAMPLE_BYTES = 6144
STRIDE_BYTES = 20480
# Below this many characters the grid is twice as dense (half the bytes are compressed): any
# pad of at least 18 KiB contains a sample. Tiling everything would cost ~18% of tokenising
# JSON, over the 15% budget; half costs ~10%. Texts under one stride are tiled (`_tiles`).
DENSE_SAMPLING_CHARS = 65536
DENSE_STRIDE_BYTES = 2 * SAMPLE_BYTES
MIN_SAMPLE_BYTES = 1024
_MIN_SAMPLED_BYTES = MIN_SAMPLE_BYTES * DENSE_STRIDE_BYTES // SAMPLE_BYTES
_CHUNK_CHARS = 1 << 18  # encode 256K characters at a time: bounded memory on 20 MB payloads
# zlib level-1 ratio (sample bytes / compressed bytes) that is padding. Prose-like samples
# (letters and single spaces) repeat little; structured data legitimately repeats keys, frames
# and indentation. Benign corpus: prose-like <= 4.4 (Go source), other <= 14.4 (Java stack
# traces). Adversarial, first sample to fire: mutated phrases 13.1, lorem ipsum and counted
# lines 17-19, floods 90-146.
PROSE_REPETITION_RATIO = 8.0
DATA_REPETITION_RATIO = 32.0
# Counters defeat zlib on short repeated units; masking digits undoes that. Benign corpus,
# masked: <= 13.7 (stack traces); records, rows and lines with a counter: >= 45.
MASKED_GATE_RATIO = 6.0
MASKED_REPETITION_RATIO = 30.0
# A sample with this few distinct characters is padding (spaces, newlines, "0101...").
# DNA, the least diverse benign sample, has 5 (ACGT and newline).
MAX_DISTINCT_CHARS = 3
# An eighth of a sample compressing this well is copied text (natural text stays near 2).
_REPEATED_PIECE_RATIO = 4.0
_DIVERSITY_GATE_RATIO = 3.0  # three symbols cannot compress worse than ~3.4 with Huffman codes
_LETTERS = bytes(range(65, 91)) + bytes(range(97, 123))
_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))
_MASK_DIGITS = bytes.maketrans(b"123456789", b"000000000")


class _Chunk(NamedTuple):
    """Encoded bytes of text[start:...], preceded by `carry` bytes left over from the previous chunk."""

    data: bytes
    start: int
    carry: int

    def before(self, pos: int) -> bytes:
        """Up to 8 KiB of the bytes that precede `pos` in this chunk."""
        return self.data[max(pos - 8192, 0) : pos]

    def char_offset(self, pos: int) -> int:
        # Every character has exactly one non-continuation byte: count those, only when a finding
        # needs an offset.
        if pos >= self.carry:
            return self.start + _count_chars(self.data[self.carry : pos])
        return self.start - _count_chars(self.data[pos : self.carry])


def _count_chars(data: bytes) -> int:
    return len(data.translate(None, _CONTINUATION_BYTES))


def _samples(text: str) -> Iterator[tuple[bytes, _Chunk, int]]:
    """Each sample of a fixed byte grid over the UTF-8 text, with where to find its offset."""
    stride = DENSE_STRIDE_BYTES if len(text) < DENSE_SAMPLING_CHARS else STRIDE_BYTES
    chunk, pos = _Chunk(b"", 0, 0), 0
    for start in range(0, len(text), _CHUNK_CHARS):
        carry = chunk.data[pos:]
        # "replace" turns a lone surrogate into one "?" byte, so byte and character counts agree.
        chunk = _Chunk(
            carry + text[start : start + _CHUNK_CHARS].encode("utf-8", "replace"), start, len(carry)
        )
        pos = 0
        while len(chunk.data) - pos >= stride:
            yield chunk.data[pos : pos + SAMPLE_BYTES], chunk, pos
            pos += stride
    if pos == 0:
        yield from _tiles(chunk)
        return
    # The tail, shorter than a stride, gets the same share of its bytes, taken at its end
    # (where appended filler sits).
    size = (len(chunk.data) - pos) * SAMPLE_BYTES // stride
    if size >= MIN_SAMPLE_BYTES:
        yield chunk.data[len(chunk.data) - size :], chunk, len(chunk.data) - size


def _tiles(chunk: _Chunk) -> Iterator[tuple[bytes, _Chunk, int]]:
    """A text shorter than one stride is compressed whole, in at most two equal samples.

    Its pad may sit anywhere and be most of it; under 12 KiB this costs tens of microseconds.
    Under 1 KiB of UTF-8 there is no sample (`_sampled` already skips ASCII under 2 KiB).
    """
    size = len(chunk.data)
    if size < MIN_SAMPLE_BYTES:
        return
    count = -(-size // SAMPLE_BYTES)
    step = -(-size // count)
    for pos in range(0, size, step):
        yield chunk.data[pos : pos + step], chunk, pos


def _prose_like(sample: bytes) -> bool:
    size = len(sample)
    letters = size - len(sample.translate(None, _LETTERS))
    return letters >= 0.65 * size and sample.count(b" ") >= 0.08 * size and sample.count(b"  ") < 0.01 * size


def _repetition(sample: bytes, ratio: float, chunk: _Chunk, pos: int) -> PaddingFinding | None:
    size = len(sample)
    if ratio >= DATA_REPETITION_RATIO or (ratio >= PROSE_REPETITION_RATIO and _prose_like(sample)):
        detail = f"compresses {ratio:.1f}x (zlib level 1, {size} bytes)"
        offset = chunk.char_offset(pos + _repeats_from(sample, chunk.before(pos)))
        return PaddingFinding(PaddingReason.REPETITION, offset, round(ratio, 2), detail=detail)
    if ratio >= MASKED_GATE_RATIO:
        masked_sample = sample.translate(_MASK_DIGITS)
        masked = size / len(zlib.compress(masked_sample, 1))
        if masked >= MASKED_REPETITION_RATIO:
            detail = f"compresses {masked:.1f}x with digits masked (zlib level 1, {size} bytes)"
            before = chunk.before(pos).translate(_MASK_DIGITS)
            offset = chunk.char_offset(pos + _repeats_from(masked_sample, before))
            return PaddingFinding(PaddingReason.REPETITION, offset, round(masked, 2), detail=detail)
    return None


def _repeats_from(sample: bytes, before: bytes) -> int:
    """Where, in a sample that fired, the copying starts (to about 100 bytes).

    A sample can straddle the start of a pad: the first eighth that compresses well given
    the text before it holds the start of the pad's copies, and the first sixty-fourth of
    the sample inside that eighth that does so is where they begin. Runs once per finding.
    """
    step = max(len(sample) // 8, 1)
    coarse = _first_repeated_piece(sample, before, step)
    if coarse is None:
        return 0
    piece = sample[coarse : coarse + step]
    fine = _first_repeated_piece(piece, (before + sample[:coarse])[-32768:], max(step // 8, 1))
    return coarse + (fine or 0)


def _first_repeated_piece(data: bytes, before: bytes, step: int) -> int | None:
    stream = zlib.compressobj(1, zdict=before) if before else zlib.compressobj(1)
    for start in range(0, len(data), step):
        piece = data[start : start + step]
        compressed = len(stream.compress(piece)) + len(stream.flush(zlib.Z_SYNC_FLUSH))
        if len(piece) >= _REPEATED_PIECE_RATIO * compressed:
            return start
    return None


def _low_diversity(sample: bytes, chunk: _Chunk, pos: int) -> PaddingFinding | None:
    # Three characters are at most 12 distinct byte values: a cheap, exact rejection.
    if len(set(sample[:256])) > 4 * MAX_DISTINCT_CHARS:
        return None
    chars = sample.decode("utf-8", "ignore")
    remaining, distinct = chars, 0
    # Deleting one character at a time costs at most MAX_DISTINCT_CHARS + 1 C-speed passes.
    while remaining and distinct <= MAX_DISTINCT_CHARS:
        remaining = remaining.replace(remaining[0], "")
        distinct += 1
    if remaining or not chars:
        return None
    score = round(len(chars) / distinct, 2)
    detail = f"{distinct} distinct characters in {len(chars)}"
    return PaddingFinding(PaddingReason.LOW_DIVERSITY, chunk.char_offset(pos), score, detail=detail)


def _sampled(text: str) -> list[PaddingFinding]:
    if 4 * len(text) < _MIN_SAMPLED_BYTES or (len(text) < _MIN_SAMPLED_BYTES and text.isascii()):
        return []  # too short for a sample: most tool results, spared any setup
    stream = None  # created on the first sample: a zlib state costs microseconds to set up
    repetition: PaddingFinding | None = None
    diversity: PaddingFinding | None = None
    for sample, chunk, pos in _samples(text):
        stream = stream or zlib.compressobj(1)
        compressed = len(stream.compress(sample)) + len(stream.flush(zlib.Z_SYNC_FLUSH))
        ratio = len(sample) / max(compressed, 1)
        if repetition is None:
            repetition = _repetition(sample, ratio, chunk, pos)
        if diversity is None and ratio >= _DIVERSITY_GATE_RATIO:
            diversity = _low_diversity(sample, chunk, pos)
        if repetition is not None and diversity is not None:
            break
    return [f for f in (repetition, diversity) if f is not None]


# --- token density --------------------------------------------------------------------------
# o200k tokens per character: (benign median, limit), measured on the benign corpus. A block is
# classified by its first 4 KB but may carry anything after it (a README with a data-URI image
# is 0.59; base64 is 0.68-0.75, numbers 0.71, real Chinese 0.74-0.89), so the text types share
# a limit near 1.0; emoji-only text reaches 2.0. Random rare or astral characters cost 2-4.
TOKEN_DENSITY_NORMS: dict[ContentType, tuple[float, float]] = {
    ContentType.PROSE: (0.22, 1.00),  # benign max 0.59 (inline image); garbage after prose 2.0
    ContentType.JSON: (0.38, 1.20),  # benign max 0.71 (numbers); astral garbage in a field 3.9
    ContentType.CODE: (0.28, 1.00),  # benign max 0.36 (SQL)
    ContentType.CJK: (0.57, 1.50),  # benign max 0.64, real Chinese 0.89; random BMP 2.3
    ContentType.BASE64: (0.68, 1.10),  # benign max 0.69; random bytes in base64 stay under 0.75
    ContentType.OTHER: (0.37, 2.50),  # benign max 1.27 (emoji reactions); astral garbage 3.9
}
MIN_DENSITY_CHARS = 1024


def _token_density(text: str, tokens: int, content_type: ContentType) -> PaddingFinding | None:
    if len(text) < MIN_DENSITY_CHARS:
        return None
    norm, limit = TOKEN_DENSITY_NORMS.get(content_type, TOKEN_DENSITY_NORMS[ContentType.OTHER])
    density = tokens / len(text)
    if density <= limit:
        return None
    detail = f"{density:.2f} tokens per character, {content_type.value} limit {limit:.2f}"
    return PaddingFinding(PaddingReason.TOKEN_DENSITY, 0, round(density / norm, 2), detail=detail)


# --- long lines of prose --------------------------------------------------------------------
# Prose paragraphs rarely exceed a few thousand characters; markdown keeps a paragraph on
# one line, legal text runs to ~10,000. Benign corpus max: 9,155 (a 100-sentence paragraph);
# adversarial: 50,000.
MAX_PROSE_LINE_CHARS = 20000
_LINE_SAMPLE_CHARS = 4096


def _long_line(text: str) -> PaddingFinding | None:
    sep = "\n" if "\n" in text else "\r"
    limit, start, size = MAX_PROSE_LINE_CHARS, 0, len(text)
    while size - start > limit:
        # The last separator in the next `limit` characters; none means a long line starts here.
        cut = text.rfind(sep, start, start + limit + 1)
        if cut >= 0:
            start = cut + 1
            continue
        end = text.find(sep, start + limit)
        end = size if end < 0 else end
        # A long line of base64 or minified code inside a prose document is data, not prose.
        if _prose_like(text[start : start + _LINE_SAMPLE_CHARS].encode("utf-8", "replace")):
            detail = f"a line of {end - start} characters (limit {limit})"
            return PaddingFinding(PaddingReason.LONG_LINE, start, float(end - start), detail=detail)
        start = end + 1
    return None


def detect_padding(
    text: str, *, tokens: int | None = None, content_type: ContentType | None = None
) -> tuple[PaddingFinding, ...]:
    """Padding findings in one content block's `text`, at most one per reason.

    Scores: invisible, the fraction of the window's characters that are suspicious invisible
    characters; repetition, the zlib level-1 compression ratio of the sample (digits masked
    when that is what fired); low_diversity, characters per distinct character in the sample;
    token_density, tokens per character divided by the content type's norm; long_line, the
    line's length in characters. `tokens` enables the density check; `content_type` defaults
    to `classify(text)`.
    """
    if not text:
        return ()
    kind = content_type if content_type is not None else classify(text)
    found: list[PaddingFinding | None] = [_invisible(text), *_sampled(text)]
    if tokens is not None:
        found.append(_token_density(text, tokens, kind))
    if kind is ContentType.PROSE:
        found.append(_long_line(text))
    return tuple(f for f in found if f is not None)
