# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact Claude token counts (ctok's reconstruction), at tiktoken-like speed.

`ClaudeTokenizer.count(text)` equals `len(ctok.tokenize(text, version))` minus the
family's message frame: the content tokens of `text` sent as one message. It gets there
by caching what repeats in real payloads instead of redoing ctok's per-character Python:

1. The text is normalised as ctok does (NFC, controls, quote folding), with a fast path
   for ASCII, and cut by `\\S+\\s*` into tokens: a whitespace-free run and the whitespace
   after it. ctok's stream decorates a run by its own characters and the whitespace next
   to it only (`claude_stream`), and no piece crosses whitespace, so a token's tokens are a
   function of the token alone, up to three things its neighbours decide:
   - after one space, a run that opens with [case]⟨bow⟩ absorbs the space (the seam) when
     the run before ends with ⟨eow⟩: `seam_end` (this token) and `bow_start` (the next);
   - a run that opens with punctuation (or a symbol, a non-ASCII digit) takes ⟨bow⟩ only
     after a space: `delta` is what its count moves by after other whitespace.
   Each token's four numbers are computed once and kept; a count is then a few C-level
   passes (`sum(map(...))`) over the tokens, plus those corrections between neighbours.
2. A token seen for the first time is cut at letter/punctuation and digit boundaries into
   parts (`CharTables.split`) whose streams and tilings are independent; each part is
   decorated (`Decorator`) and tiled (`Tiler`) once, with only the context it depends on.
3. The first token carries the message head (a leading space, the frame's ⟨bow⟩) and
   trailing newlines the frame tail; both are counted by ctok's rules directly.

Memory is bounded: every cache has an entry limit and keeps nothing over 256 characters;
texts are counted in chunks of `chunk_chars` cut at whitespace. Work is bounded too: text
that the caches cannot help with (base64, random identifiers) costs ctok's own speed per
new part, so past `miss_budget` new parts (plus one per `miss_chars` characters) a count
gives up with `EstimateInstead` and is the calibrated estimate, flagged inexact. Importing this module
imports ctok (Python >= 3.12); use `engine.claude.load_claude` rather than this module.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Callable, Iterator
from itertools import compress
from typing import Any

from ctok.constants import BOW_G, CAPS_G, EOW_G, LITERAL_MARKER_ESCAPE_TABLE, SHIFT_G

from .claude_estimate import ClaudeEstimateTokenizer
from .claude_stream import CharTables, Decorator
from .claude_tiling import CACHEABLE_CHARS, Memo, Tiler
from .estimate import EstimateInstead
from .prefix import search_prefix

ctok_main: Any = importlib.import_module("ctok.main")
ctok_normalize: Any = importlib.import_module("ctok.normalize")

_TOKENS = re.compile(r"\S+\s*")
_CHUNK_CUT = re.compile(r"\s(?=\S)")
_ASCII_CONTROLS = bytes(range(0x09)) + bytes(range(0x0B, 0x20)) + b"\x7f"
_LITERAL_MARKERS = tuple(map(chr, LITERAL_MARKER_ESCAPE_TABLE))
# Every ASCII digit string of up to three digits is a piece, and no piece mixes ASCII
# digits with anything else (checked at load): digits can then be folded to "0" without
# changing a count, so numbers, IDs and timestamps share cache entries.
_DIGIT_FOLD = bytes.maketrans(b"123456789", b"000000000")
_CASE = SHIFT_G + CAPS_G

_tables: list[CharTables] = []
_tables_lock = threading.Lock()


def char_tables() -> CharTables:
    """The per-character tables, built once per process (all families share them)."""
    with _tables_lock:
        if not _tables:
            _tables.append(CharTables())
        return _tables[0]


class ClaudeTokenizer:
    """Content tokens of one ctok family (`version`: "3.0", "4.7", ...), exact and fast.

    `count` never raises for a str. The caches hold at most `cache_entries` entries each.
    """

    exact = True
    chunkable = False  # counts its own chunks (see `count`)
    max_token_bytes: int | None = None  # markers cost tokens without bytes: no bytes bound

    def __init__(
        self,
        name: str,
        version: str,
        *,
        cache_entries: int = 100_000,
        chunk_chars: int = 1 << 18,
        miss_budget: int = 8_000,
        miss_chars: int = 100,
    ) -> None:
        family = ctok_main._family(version)
        self.name = name
        self.version = version
        self.family = family
        self._model = ctok_main._model(family)
        # The parsed vocabulary document is ctok's own cache; the model keeps what counting needs.
        ctok_main._document.cache_clear()
        self._tables = char_tables()
        self._decorator = Decorator(self._model, self._tables)
        self._tiler = Tiler(self._model)
        self._fold_digits = _digits_fold_exactly(self._model.vocab)
        self._cache_entries = cache_entries
        self._chunk_chars = chunk_chars
        # Per token: its cost (after a single space), and its seam flags: bit 1, it ends in a
        # single space after ⟨eow⟩; bit 0, after a single space it opens with [case]⟨bow⟩.
        self._cost: dict[str, int] = {}
        self._flags: dict[str, int] = {}
        self._delta: dict[str, int] = {}
        self._parts: dict[tuple[str, str, str], tuple[int, bool, bool]] = {}
        self._spaces: dict[str, int] = {}
        # Parts between two others depend on nothing around them: their costs alone.
        self._inner = Memo(lambda part: self._part("", part, "")[0], cache_entries)
        self._miss_budget = miss_budget
        self._miss_chars = miss_chars
        self._misses_left = 0
        self._lock = threading.Lock()  # the caches are shared state
        self._estimate = ClaudeEstimateTokenizer(name, family)
        self.message_overhead = int(self._model.message_overhead)
        # A token spans at most this many characters of text: its piece plus a seam space.
        self.max_token_chars = self._tiler.max_len + 1

    # --- the count ---------------------------------------------------------------------
    def count(self, text: str) -> int:
        """Content tokens of `text` as one user message (0 for ""); raises EstimateInstead
        when counting it would take more than the work budget."""
        if not text:
            return 0
        with self._lock:
            self._misses_left = self._miss_budget + len(text) // self._miss_chars
            return self._count(text)

    def estimate(self, text: str) -> int:
        """The calibrated estimate of `text` (what a caller uses after EstimateInstead)."""
        return self._estimate.count(text)

    def prefix(self, text: str, budget: int, count: Callable[[str], int]) -> tuple[int, int]:
        """(characters, tokens) of a long prefix of `text` that counts at most `budget` on
        its own, by `count` (the caller's exact count; see `prefix.search_prefix`)."""
        longest = (budget + 1) * self.max_token_chars + 1  # no longer prefix can fit (min_tokens)
        return search_prefix(text, budget, count, max_chars=longest)

    def _count(self, text: str) -> int:
        norm = self.normalise(text)
        body = norm.rstrip("\n")
        total = self._tiler.frame_tail(len(norm) - len(body))
        if any(marker in body for marker in _LITERAL_MARKERS):
            body = body.translate(LITERAL_MARKER_ESCAPE_TABLE)
        stripped = body.lstrip()
        lead = body[: len(body) - len(stripped)]
        if self._fold_digits:
            stripped = _fold_digits(stripped)
        previous: str | None = None
        for chunk in self._chunks(stripped):
            tokens = _TOKENS.findall(chunk)
            if previous is None:
                total += self._head(text.startswith(" "), lead, tokens[0] if tokens else "")
                total += self._sum(tokens, skip_first=True)
            else:
                total += self._sum([previous, *tokens], skip_first=True)
            if tokens:
                previous = tokens[-1]
        return total

    def normalise(self, text: str) -> str:
        """ctok's normalisation (its `nfc`): ASCII text without control characters is
        already normal, which saves four passes over most payloads."""
        if text.isascii():
            raw = text.encode("ascii")
            if len(raw.translate(None, _ASCII_CONTROLS)) == len(raw):
                return text
        normalised: str = ctok_normalize.nfc(text, fold_quotes=self._model.fold_quotes)
        return normalised

    def min_tokens(self, text: str) -> int:
        """A lower bound of `count(text)` that costs one pass: each token spans at most
        `max_token_chars` characters of the normalised text, trailing newlines aside."""
        body = self.normalise(text).rstrip("\n")
        # One leading space may be the frame's, and cost nothing.
        return max(0, len(body) - 1) // self.max_token_chars

    def _chunks(self, text: str) -> Iterator[str]:
        """`text` in pieces of about `chunk_chars`, cut where whitespace meets a word, so no
        token spans two pieces and the lists of tokens stay bounded."""
        start = 0
        size = self._chunk_chars
        while len(text) - start > size:
            cut = _CHUNK_CUT.search(text, start + size)
            if cut is None:
                break
            yield text[start : cut.end()]
            start = cut.end()
        yield text[start:]

    def _sum(self, tokens: list[str], *, skip_first: bool) -> int:
        """Tokens of `tokens` in a row, the first one's own cost left out when `skip_first`
        (it is the message head, or was counted with the previous chunk)."""
        if not tokens:
            return 0
        cost = self._cost
        unkept: list[str] = []
        try:
            try:
                total: int = sum(map(cost.__getitem__, tokens))
            except KeyError:
                unkept = self._learn_missing(tokens)
                total = sum(map(cost.__getitem__, tokens))
            if skip_first:
                total -= cost[tokens[0]]
            if len(tokens) > 1:
                total -= self._seams(tokens)
                total += self._delta_after_other_whitespace(tokens)
            return total
        finally:
            for token in unkept:  # too long to keep: counted, then forgotten
                self._forget(token)

    def _seams(self, tokens: list[str]) -> int:
        """Single spaces counted in `cost` that are seams: the token before ends in ⟨eow⟩ and
        a single space, the token after opens with [case]⟨bow⟩, and the space costs nothing.
        One flag byte per token, read as one integer: a token's bit 1 lines up with the next
        token's bit 0 after a shift, and the pairs are counted by popcount."""
        flags = bytes(map(self._flags.__getitem__, tokens))
        packed = int.from_bytes(flags, "little")
        ones = int.from_bytes(b"\x01" * len(flags), "little")
        return ((packed >> 1) & (packed >> 8) & ones).bit_count()

    def _delta_after_other_whitespace(self, tokens: list[str]) -> int:
        """What tokens that open with punctuation cost more or less after whitespace that
        does not end in a space (a newline, a tab): they were counted as after a space."""
        delta = self._delta
        if delta.keys().isdisjoint(tokens):
            return 0
        # Such tokens are a few per cent of a text: find them at C speed, then look back.
        where = compress(range(len(tokens)), map(delta.__contains__, tokens))
        correction = 0
        for index in where:
            if index and not tokens[index - 1].endswith(" "):
                correction += delta[tokens[index]]
        return correction

    def _learn_missing(self, tokens: list[str]) -> list[str]:
        """Learn the tokens not seen before; returns those too long to keep. On a budget
        overrun (EstimateInstead) the long ones learned so far are forgotten first."""
        missing = set(tokens).difference(self._cost)
        if len(self._cost) + len(missing) > self._cache_entries:
            self._clear_tokens()
            missing = set(tokens)
        unkept: list[str] = []
        try:
            for token in missing:
                if len(token) > CACHEABLE_CHARS:
                    unkept.append(token)
                self._learn(token)
        except EstimateInstead:
            for token in unkept:
                self._forget(token)
            raise
        return unkept

    def _clear_tokens(self) -> None:
        for table in (self._cost, self._flags, self._delta):
            table.clear()

    def _forget(self, token: str) -> None:
        for table in (self._cost, self._flags, self._delta):
            table.pop(token, None)

    # --- one token, through its parts --------------------------------------------------
    def _learn(self, token: str) -> None:
        run = token.rstrip()
        space = token[len(run) :]
        left = " " if self._tables.sensitive(run[0]) else ""
        right = self._right_context(run, space)
        if left:
            cost, opens_bow, ends_eow = self._parts_cost(left, run, right)
            other = self._parts_cost("\n", run, right)[0]
        else:
            cost, opens_bow, ends_eow = self._parts_cost("", run, right)
            other = cost
        if other != cost:
            self._delta[token] = other - cost
        self._cost[token] = cost + (self._space(space) if space else 0)
        self._flags[token] = (space == " " and ends_eow) << 1 | opens_bow

    def _right_context(self, run: str, space: str) -> str:
        """What a run's last part sees after it: " " (one space: ⟨eow⟩ for punctuation),
        "\n" (other whitespace, or two spaces), "" (its end does not care)."""
        if not run or not self._tables.sensitive(run[-1]):
            return ""
        return " " if space[:1] == " " and space[1:2] != " " else "\n"

    def _parts_cost(self, left: str, run: str, right: str) -> tuple[int, bool, bool]:
        """(tokens, opens with [case]⟨bow⟩, ends with ⟨eow⟩) of a whitespace-free run between
        `left` and `right`, part by part (the parts between the first and the last depend
        on nothing around them)."""
        if len(run) > self._chunk_chars:
            return self._long_parts_cost(left, run, right)
        parts = self._tables.split(run)
        if len(parts) == 1:
            return self._part(left, run, right)
        first, opens_bow, _ = self._part(left, parts[0], "")
        last, _, ends_eow = self._part("", parts[-1], right)
        return first + sum(map(self._inner.__getitem__, parts[1:-1])) + last, opens_bow, ends_eow

    def _long_parts_cost(self, left: str, run: str, right: str) -> tuple[int, bool, bool]:
        """`_parts_cost` for a run too long to split into one list (megabytes without
        whitespace): its parts one at a time."""
        parts = self._tables.split_lazily(run)
        first_part = next(parts)
        inner = self._inner
        middle, previous = 0, None
        for part in parts:
            if previous is not None:
                middle += inner[previous]
            previous = part
        if previous is None:
            return self._part(left, first_part, right)
        first, opens_bow, _ = self._part(left, first_part, "")
        last, _, ends_eow = self._part("", previous, right)
        return first + middle + last, opens_bow, ends_eow

    def _space(self, space: str) -> int:
        hit = self._spaces.get(space)
        if hit is None:
            hit = self._tiler.tile(space)
            if len(space) <= CACHEABLE_CHARS and len(self._spaces) < self._cache_entries:
                self._spaces[space] = hit
        return hit

    def _part(self, left: str, core: str, right: str) -> tuple[int, bool, bool]:
        """(tokens, opens with [case]⟨bow⟩, ends with ⟨eow⟩) of `core` between `left` and
        `right`: " " a single space, "\\n" other whitespace, "" a word-like neighbour."""
        key = (left, core, right)
        hit = self._parts.get(key)
        if hit is not None:
            return hit
        self._misses_left -= 1
        if self._misses_left < 0:
            raise EstimateInstead(f"{self.name}: more new text than the work budget")
        if not left and not right and self._fold_digits and core.isdigit() and core.isascii():
            hit = (-(-len(core) // 3), False, False)  # every 1-3 digit string is one piece
        else:
            _, out = self._decorator.decorate(left + core + right, head=False)
            if right:
                out.pop()
            if left:
                del out[0]
            stream = "".join(out)
            hit = (self._tiler.tile(stream), stream.lstrip(_CASE).startswith(BOW_G), stream.endswith(EOW_G))
        if len(core) <= CACHEABLE_CHARS:
            if len(self._parts) >= self._cache_entries:
                self._parts.clear()
            self._parts[key] = hit
        return hit

    def _head(self, raw_head_space: bool, lead: str, token: str) -> int:
        """The first token with the whitespace before it, as the message frame reads them: its
        first part is decorated at the head of the message, the others as anywhere."""
        run = token.rstrip()
        space = token[len(run) :]
        right = self._right_context(run, space)
        parts = self._tables.split_lazily(run) if run else iter([run])
        first = next(parts, "")
        rest = run[len(first) :]
        first_right = "" if rest else right
        prefix, out = self._decorator.decorate(
            lead + first + first_right, head=True, raw_head_space=raw_head_space
        )
        if first_right:
            out.pop()
        total = self._tiler.tile(prefix + "".join(out))
        if rest:
            total += self._parts_cost("", rest, right)[0]
        return total + (self._space(space) if space else 0)


def _fold_digits(text: str) -> str:
    # UTF-8 never holds an ASCII digit byte inside a multi-byte character, so folding the
    # bytes is folding the digits, at C speed whatever the script.
    return text.encode("utf-8", "surrogatepass").translate(_DIGIT_FOLD).decode("utf-8", "surrogatepass")


def _digits_fold_exactly(vocab: Any) -> bool:
    """Whether any ASCII digit string of a given length costs the same: all of up to three
    digits are pieces, and no other piece holds an ASCII digit."""
    every_short = all(f"{n:0{width}d}" in vocab for width in (1, 2, 3) for n in range(10**width))
    pure = all(
        piece.isascii() and piece.isdigit() and len(piece) <= 3
        for piece in vocab
        if any("0" <= ch <= "9" for ch in piece)
    )
    return every_short and pure


def content_count(text: str, version: str) -> int:
    """ctok's own count of `text` without the message frame (the reference, slow)."""
    tokens: list[str] = ctok_main.tokenize(text, version)
    return len(tokens) - int(ctok_main._model(ctok_main._family(version)).message_overhead)
