# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

r"""Exact cut points: where a long text can be split without changing its token count.

tiktoken splits a text into pieces with its encoding's regex (`pat_str`) and runs BPE
inside each piece, so a cut at position `p` leaves the total unchanged when

(a) the piece holding `text[p - 1]` ends at `p` when the whole text is split, and
(b) `text[:p]` split on its own yields the same pieces.

The patterns of o200k_base, cl100k_base and Llama 3 never look behind, so `text[p:]`
splits the same alone as inside the whole text. Only whitespace pieces look ahead
(`\s+(?!\S)`, cl100k's `\s++$`), so (b) holds whenever `text[p - 1]` is not whitespace.
Three kinds of cut meet (a) and (b) for all three patterns:

1. *After a newline*: right after `\r` or `\n` when the whitespace that follows holds no
   further `\r`/`\n` and ends before a visible character, and the next character is not
   `/` (o200k's punctuation piece takes a trailing `[\r\n/]*`). The newline piece
   (`\s*[\r\n]+`) then ends at the last newline of its run, as it does in `text[:p]`.
2. *Before whitespace*: between a non-whitespace character and whitespace other than
   `\r`/`\n`. No piece continues from non-whitespace into whitespace, except punctuation
   into a newline.
3. *Between character classes*: letter -> digit, letter -> punctuation/symbol,
   digit -> letter, digit -> punctuation/symbol, punctuation/symbol -> digit. Never
   punctuation -> letter (a letter piece may start with one punctuation character), never
   next to a combining mark (o200k's letter pieces take `\p{M}`), never before `'`
   (contractions such as `'s` join the letters before them).

Unicode versions differ between Python and tiktoken's Rust regex (tiktoken 0.14 knows
Unicode 16, Python 3.11 knows 14, the `regex` module 17): a letter assigned recently is
a letter to one and "other" to the next, which would join it with the punctuation after
it. So rule 3 does not ask any Unicode database: it uses explicit lists of letters,
digits and symbols from long-settled blocks, and the whitespace sets are spelled out too.
Anything else is simply not a cut: the search moves on, and a text without any cut is
counted whole.

Finding a cut is a regex search in windows that double from the target onwards (up to
`MAX_WINDOW`), so the total work is linear in the text and typical texts need a few
characters per cut. The cap keeps each search short: a regex search keeps the GIL, and a
text without any cut would otherwise end in one search over half of it (20 ms for 1 MB).
"""

from __future__ import annotations

import functools
import os
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

# Whitespace in Unicode's White_Space property (tiktoken's `\s`), without \r and \n.
_RUST_SPACE = r"\t\x0b\x0c \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# A wider set for "is this whitespace?" questions, where answering yes is the safe side:
# Python's str.isspace() also counts \x1c-\x1f, and U+180E, U+200B, U+FEFF once were.
_ANY_SPACE = _RUST_SPACE + r"\x1c-\x1f\u180e\u200b\ufeff"
# Letters (L*), digits (N*) and punctuation/symbols (P*, S*; without "'") as Unicode 14.0
# classifies them, taken from long-settled blocks: Latin, Greek, Cyrillic, Hebrew, Arabic,
# Devanagari, Thai, kana, CJK, Hangul, full width forms, general punctuation, currency,
# arrows, math, box drawing, dingbats, CJK punctuation, emoji. Assigned categories never
# change between letter, digit and symbol, so every tiktoken build (Unicode 14 or newer)
# agrees; a test checks each of them against the installed tiktoken.
_LETTERS = (
    r"A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af\u0370-\u0374"
    r"\u0376-\u0377\u037a-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5"
    r"\u03f7-\u03ff\u0400-\u0481\u048a-\u052f\u05d0-\u05ea\u0620-\u064a\u0904-\u0939\u093d\u0950"
    r"\u0958-\u0961\u0971-\u097f\u0e01-\u0e30\u0e32-\u0e33\u0e40-\u0e46\u3041-\u3096"
    r"\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u4e00-\u9fa5\uac00-\ud7a3\uff21-\uff3a"
    r"\uff41-\uff5a\uff66-\uffbe\uffc2-\uffc7\uffca-\uffcf\uffd2-\uffd7\uffda-\uffdc"
)
_DIGITS = r"0-9\u00b2-\u00b3\u00b9\u00bc-\u00be\u0660-\u0669\u0966-\u096f\u0e50-\u0e59\uff10-\uff19"
_SYMBOLS = (
    r"\x21-\x26\x28-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e\u00a1-\u00a9\u00ab-\u00ac\u00ae-\u00b1\u00b4"
    r"\u00b6-\u00b8\u00bb\u00bf\u00d7\u00f7\u2010-\u2027\u2030-\u205e\u20a0-\u20bf\u2190-\u2426"
    r"\u2440-\u244a\u249c-\u24e9\u2500-\u2775\u2794-\u27bf\u3001-\u3004\u3008-\u3020\u3030"
    r"\u3036-\u3037\u303d-\u303f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65"
    r"\U0001f300-\U0001f64f"
)

# Rules 1 and 2, anchored on the newline or on the whitespace after a visible character.
_SPACING_PATTERN = (
    rf"[\r\n{_RUST_SPACE}]"
    rf"(?:(?<=[\r\n])(?!/)(?=[{_ANY_SPACE}]*[^{_ANY_SPACE}\r\n])"
    rf"|(?<=[^{_ANY_SPACE}\r\n][{_RUST_SPACE}]))"
)
# Rule 3, anchored on the character after the cut (the lookbehind sees the one before).
_CLASS_CHANGE_PATTERN = (
    rf"[{_SYMBOLS}](?<=[{_LETTERS}{_DIGITS}].)"
    rf"|[{_DIGITS}](?<=[{_LETTERS}{_SYMBOLS}].)"
    rf"|[{_LETTERS}](?<=[{_DIGITS}].)"
)

FIRST_WINDOW = 1024
MAX_WINDOW = 8192
_SIZE_STEP = 1 << 18


@functools.lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    # Compiled on first use, so importing the engine costs nothing.
    return re.compile(_SPACING_PATTERN), re.compile(_CLASS_CHANGE_PATTERN)


def compile_cut_patterns() -> None:
    """Compile the cut patterns now (a few milliseconds, holding the GIL) rather than on first use."""
    _patterns()


def next_cut(text: str, start: int) -> int | None:
    """The first exact cut at or after `start` (0 < cut < len(text)), or None if none is left."""
    end = len(text)
    low = max(start, 1)
    width = FIRST_WINDOW
    while low < end:
        high = min(end, low + width)
        cut = _first_cut_in(text, low, high)
        if cut is not None:
            return cut
        # Step back one character: a lookahead at the window's edge saw nothing, so the
        # last position deserves a second look with more text behind it.
        low = high - 1 if high < end else end
        width = min(2 * width, MAX_WINDOW)
    return None


def _first_cut_in(text: str, low: int, high: int) -> int | None:
    spacing, class_change = _patterns()
    found = spacing.search(text, low, high)
    bound = high
    if found is not None:
        anchor = found.start()
        bound = found.end() if text[anchor] in "\r\n" else anchor
    # A class change only matters if it comes before the spacing cut.
    changed = class_change.search(text, low, bound)
    if changed is not None:
        return changed.start()
    return None if found is None else bound


def chunk_cuts(text: str, chunk_chars: int) -> list[int]:
    """Cut positions that split `text` into exact chunks of at least `chunk_chars` characters.

    Chunks are `chunk_chars` plus the distance to the next cut; a stretch without any
    cut stays in one chunk, however long.
    """
    if chunk_chars < 1:
        raise ValueError(f"chunk_chars must be >= 1, got {chunk_chars}")
    cuts: list[int] = []
    position = 0
    while len(text) - position > chunk_chars:
        cut = next_cut(text, position + chunk_chars)
        if cut is None:
            break
        cuts.append(cut)
        position = cut
    return cuts


def count_in_chunks(
    count: Callable[[str], int],
    text: str,
    chunk_chars: int,
    threads: int,
    pause: Callable[[], None] | None = None,
) -> int:
    """Sum of `count` over the exact chunks of `text`, on up to `threads` threads.

    Each worker slices its own chunk and keeps only the number, so at most `threads`
    chunk copies and token buffers exist at any moment. `pause`, if given, is called
    before each chunk is started (the caller's chance to wait for a quiet moment).
    """
    cuts = chunk_cuts(text, chunk_chars)
    if not cuts:
        return count(text)
    bounds = list(zip([0, *cuts], [*cuts, len(text)], strict=True))

    def count_chunk(bound: tuple[int, int]) -> int:
        if pause is not None:
            pause()
        return count(text[bound[0] : bound[1]])

    if threads <= 1:
        return sum(map(count_chunk, bounds))
    total = 0
    with ThreadPoolExecutor(max_workers=min(threads, len(bounds)), thread_name_prefix="mcp-tokens") as pool:
        running: deque[Future[int]] = deque()
        for bound in bounds:
            if len(running) >= threads:
                total += running.popleft().result()
            running.append(pool.submit(count_chunk, bound))
        while running:
            total += running.popleft().result()
    return total


def default_threads() -> int:
    """Threads for counting one text: 2 at most (more adds contention, not speed)."""
    return max(1, min(2, os.cpu_count() or 1))


def utf8_size_exceeds(text: str, limit: int) -> bool:
    """Whether `text` takes more than `limit` bytes as UTF-8, usually without encoding it.

    A string of n characters takes between n and 4n bytes, so only sizes in between
    are measured, a slice at a time to keep memory flat. Lone surrogates count 3 bytes,
    as the U+FFFD tiktoken turns them into.
    """
    chars = len(text)
    if chars > limit:
        return True
    if 4 * chars <= limit or text.isascii():
        return False
    size = 0
    for start in range(0, chars, _SIZE_STEP):
        size += len(text[start : start + _SIZE_STEP].encode("utf-8", "surrogatepass"))
        if size > limit:
            return True
    return False
