# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Minimum tilings of ctok's marked stream, one independent segment at a time.

Every piece of a ctok vocabulary costs one token, so a stream's count is the length of a
minimum tiling over the pieces (a character no piece covers costs its byte-fallback
tiling). ctok tiles the whole stream in one Python dynamic programme. The pieces are
much more regular than that needs:

- a character that appears in no piece of two or more characters is tiled alone;
- no piece continues past ⟨eow⟩ or starts a word other than at [case]⟨bow⟩;
- whitespace pieces are runs of one character.

So the stream falls apart into short independent segments (words, punctuation runs,
whitespace runs) whose minimum tilings add up; each is solved once with ctok's own
`min_vocab_tile` and memoised. A long run of one repeated character (padding) is
shortened first by whole copies of the longest piece of that character, each worth one
token: past `max_len² + 2·max_len` characters an optimal tiling always contains such a
piece (see `_shortened`), so the count stays exact and the work bounded.

Importing this module imports ctok (Python >= 3.12).
"""

from __future__ import annotations

import importlib
import re
from itertools import pairwise
from typing import Any

from ctok.constants import BOW_G, CAPS_G, EOW_G, ESCAPED_MARKER_LITERALS, MARKER_GLYPHS, SHIFT_G

ctok_engine: Any = importlib.import_module("ctok.engine")

WHITESPACE = " \t\n\u3000"
# Longest segment or character set kept in a cache: longer ones are unique in practice,
# and a cache of them would hold hostile payloads alive.
CACHEABLE_CHARS = 256


class Memo(dict[str, int]):
    """A bounded memo: computes a missing key with `compute`, keeps it while there is room."""

    def __init__(self, compute: Any, limit: int) -> None:
        super().__init__()
        self._compute = compute
        self._limit = limit

    def __missing__(self, key: str) -> int:
        value: int = self._compute(key)
        if len(key) <= CACHEABLE_CHARS:
            if len(self) >= self._limit:
                self.clear()
            self[key] = value
        return value


class Tiler:
    """Minimum tiling counts of stream fragments over one ctok vocabulary."""

    def __init__(self, model: Any, *, cache_entries: int = 65536) -> None:
        self._model = model
        vocab = model.vocab
        self._vocab = vocab
        self.max_len = max(map(len, vocab))
        joinable = {ch for piece in vocab if len(piece) > 1 for ch in piece}
        inner = "".join(sorted(joinable - MARKER_GLYPHS - set(WHITESPACE)))
        case = re.escape(SHIFT_G + CAPS_G)
        bow, eow = re.escape(BOW_G), re.escape(EOW_G)
        body = f"[{re.escape(inner)}]"
        # Splitting with one group yields [loose, segment, loose, segment, ...]: loose text is
        # characters that are tiled alone.
        self._segments = re.compile(
            f"( +|\t+|\n+|\u3000+|[{case}]*{bow}{body}*{eow}?|{body}+{eow}?|[{case}]+|{eow})"
        )
        self._units = Memo(self._unit_cost, cache_entries)
        self._segment_costs = Memo(self._segment_cost, cache_entries)
        self._repeats: dict[str, list[int]] = {}

    def tile(self, fragment: str) -> int:
        """Tokens of a minimum tiling of `fragment`, a piece of marked stream that no piece
        crosses into at either end."""
        parts = self._segments.split(fragment)
        loose = "".join(parts[0::2])
        total = sum(map(self._units.__getitem__, loose)) if loose else 0
        return total + sum(map(self._segment_costs.__getitem__, parts[1::2]))

    def repeat_cost(self, ch: str, count: int) -> int:
        """Tokens of `ch` repeated `count` times, on its own."""
        table = self._repeat_table(ch)
        longest, step = self._best_piece(ch)
        extra = 0
        if count >= len(table):
            blocks = (count - len(table)) // longest + 1
            count -= blocks * longest
            extra = blocks * step
        return table[count] + extra

    def frame_tail(self, newlines: int) -> int:
        """What `newlines` content-final newlines cost: the frame appends two, and one token of
        that run is the frame's own (ctok's `frame_tail`)."""
        return self.repeat_cost("\n", newlines + 2) - 1 if newlines else 0

    # --- internals -------------------------------------------------------------------
    def _unit_cost(self, ch: str) -> int:
        """One character tiled alone: a piece or marker is one token, anything else its
        minimum tiling of UTF-8 bytes over the byte-fallback pieces."""
        if ch in MARKER_GLYPHS:
            return 1
        ch = ESCAPED_MARKER_LITERALS.get(ch, ch)
        if ch in self._model.unit_pieces:
            return 1
        floor = self._model.bytes
        data = ch.encode("utf-8", "surrogatepass")
        if not floor.tokens:
            return len(data)

        def piece(start: int, end: int) -> int | None:
            return 1 if end - start == 1 or data[start:end].hex() in floor.tokens else None

        cost, _ = ctok_engine.min_tile(len(data), piece, floor.max_len)
        return int(cost)

    def _segment_cost(self, segment: str) -> int:
        if len(segment) > 1 and segment[0] in WHITESPACE and segment.count(segment[0]) == len(segment):
            return self.repeat_cost(segment[0], len(segment))
        if len(segment) == 1:
            return self._units[segment]
        segment, extra = self._shortened(segment)
        units = self._units

        def unit(at: int) -> int:
            return units[segment[at]]

        cost, _ = ctok_engine.min_vocab_tile(segment, self._model.trie, unit)
        return int(cost) + extra

    def _shortening_threshold(self) -> int:
        return self.max_len * self.max_len + 2 * self.max_len + 1

    def _shortened(self, segment: str) -> tuple[str, int]:
        """`segment` with each long run of one character cut short by whole copies of that
        character's longest piece, and the tokens those copies are worth.

        Why it is exact: in a tiling of a run of c, the pieces inside it are pieces of c
        alone; at most `max_len` characters at each end belong to pieces that cross into
        the neighbours. Among any `L` (the longest c-piece's length) pieces shorter than
        `L`, some subset spans a multiple of `L` characters and can be replaced by fewer
        longest pieces, so a minimum tiling of more than `L²` inner characters contains a
        longest piece. Removing (or adding) one changes the count by one token, the best
        any c-piece does per character; beyond the threshold this holds for every length.
        """
        threshold = self._shortening_threshold()
        if len(segment) < threshold:
            return segment, 0
        extra = 0
        pieces: list[str] = []
        last = 0
        for start, end, ch in self._long_runs(segment, threshold):
            longest, step = self._best_piece(ch)
            blocks = (end - start - threshold) // longest
            pieces.append(segment[last:start])
            pieces.append(ch * (end - start - blocks * longest))
            extra += blocks * step
            last = end
        pieces.append(segment[last:])
        return "".join(pieces), extra

    @staticmethod
    def _long_runs(segment: str, threshold: int) -> list[tuple[int, int, str]]:
        """(start, end, character) of runs of one character longer than `threshold`, found
        without a backreference scan: a run twice the probe spacing long shows the same
        character at two probes in a row, and only those characters are searched for. (A run
        missed here is merely tiled in full.)"""
        spacing = max(1, threshold // 2)
        probes = segment[::spacing]
        candidates = {a for a, b in pairwise(probes) if a == b}
        runs = [
            (match.start(), match.end(), ch)
            for ch in candidates
            for match in re.finditer(f"{re.escape(ch)}{{{threshold + 1},}}", segment)
        ]
        return sorted(runs)

    def _best_piece(self, ch: str) -> tuple[int, int]:
        """(length, tokens) of the cheapest-per-character way to tile a run of `ch`: its
        longest piece, or the character alone when no piece of it exists."""
        lengths = [k for k in range(1, self.max_len + 1) if ch * k in self._vocab]
        if lengths:
            return max(lengths), 1
        return 1, self._units[ch]

    def _repeat_table(self, ch: str) -> list[int]:
        """Minimum tokens of `ch` repeated 0..N times, N past the point where adding the
        longest piece always adds one token (see `_shortened`)."""
        table = self._repeats.get(ch)
        if table is None:
            lengths = [k for k in range(2, self.max_len + 1) if ch * k in self._vocab]
            single = self._units[ch]
            size = self._shortening_threshold() + 1
            table = [0] * size
            for n in range(1, size):
                best = table[n - 1] + single
                for k in lengths:
                    if k <= n and table[n - k] + 1 < best:
                        best = table[n - k] + 1
                table[n] = best
            if len(self._repeats) < 64:
                self._repeats[ch] = table
        return table
