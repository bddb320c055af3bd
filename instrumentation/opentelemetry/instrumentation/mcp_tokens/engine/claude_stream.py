# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""ctok's marked stream, rebuilt from runs found by one regular expression.

ctok (the `claude` extra) counts Claude tokens as the length of a minimum tiling of a
"marked stream": the normalised text with word boundaries (⟨bow⟩, ⟨eow⟩) and case markers
(⟨shift⟩, ⟨caps⟩) written in. Its `stream_norm` finds the text's runs one character at a
time in Python, which is most of why it reads about 0.2 MB/s. Here each character's class
is computed once, from ctok's own `classify` and helpers, into regular-expression classes;
runs are then found by one expression and decorated by the same rules as ctok 1.3.0's
`stream_norm` (its helpers are called for the rare rules). `Decorator.stream` equals
`ctok.normalize.stream` on every text the tests try, hostile ones included.

Importing this module imports ctok (Python >= 3.12).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ctok.constants import (
    BOW_G,
    CAPS_G,
    DIGIT,
    EOW_G,
    HARD,
    LITERAL_MARKER_ESCAPE_TABLE,
    PUNCT,
    SEAM_RE,
    SHIFT_G,
    SPACE,
    VARIATION_SELECTORS,
    WORDY,
)

# `ctok.normalize` the module: the package re-exports a function under the same name.
ctok_normalize: Any = importlib.import_module("ctok.normalize")

STRAY = "stray_mark"  # ctok's class for a combining mark that opens a word
Run = tuple[str, str]  # (class, text), as ctok's `_runs` yields them

_BMP = 0x10000
_ASTRAL = "\U00010000-\U0010ffff"
# Per-character class letters: w a letter, m a combining mark that may open a word, d a
# digit (ASCII, Arabic-Indic), p punctuation, s whitespace; hard characters by the kind
# of run they belong to: h letter-like (ideographs, astral), n number-like (other
# digits, fractions), q punctuation- or symbol-like, v a variation selector (rides the
# run it follows).
_LETTERS = "wmdpshnqv"
# Characters whose class makes a run's border markers depend on the whitespace beside it.
_SENSITIVE = 1
# A hard character that gives its run border markers (ctok's `_hard_bow` / `_hard_eow`).
_BORDERED = 2
_RUN_CLASSES = (WORDY, STRAY, DIGIT, PUNCT, SPACE, HARD, HARD, HARD)


def _class_letter(ch: str) -> str:
    cls = ctok_normalize.classify.__wrapped__(ch)  # unwrapped: its cache would keep every character
    if cls == WORDY:
        return "m" if ctok_normalize._stray_mark(ch) else "w"
    if cls == HARD:
        if VARIATION_SELECTORS[0] <= ord(ch) <= VARIATION_SELECTORS[1]:
            return "v"
        return {"punct": "q", "number": "n", "letter": "h"}[ctok_normalize._hard_kind(ch)]
    return {DIGIT: "d", PUNCT: "p", SPACE: "s"}[cls]


def char_class(codepoints: Iterable[int]) -> str:
    """A regular-expression class body (no brackets) matching exactly `codepoints`."""
    points = sorted(set(codepoints))
    spans: list[str] = []
    start = 0
    while start < len(points):
        end = start
        while end + 1 < len(points) and points[end + 1] == points[end] + 1:
            end += 1
        first, last = chr(points[start]), chr(points[end])
        spans.append(re.escape(first) if start == end else f"{re.escape(first)}-{re.escape(last)}")
        start = end + 1
    return "".join(spans)


class CharTables:
    """Per-character classes of the whole BMP (astral characters are all `h`), as regular
    expressions and flags. Built once per process (about half a second)."""

    def __init__(self) -> None:
        escapes = {k: ord(v) for k, v in LITERAL_MARKER_ESCAPE_TABLE.items()}  # a str.maketrans table
        members: dict[str, list[int]] = {letter: [] for letter in _LETTERS}
        for cp in range(_BMP):
            if 0xD800 <= cp <= 0xDFFF:
                continue
            # Literal noncharacters that ctok uses as markers are escaped to private-use
            # code points before classing; class them as their escapes are.
            members[_class_letter(chr(escapes.get(cp, cp)))].append(cp)
        self.flags = bytearray(_BMP)
        insensitive = {*members["w"], *members["m"], *members["h"], *range(0x30, 0x3A), *members["s"]}
        for letter, points in members.items():
            for cp in points:
                if cp not in insensitive:
                    self.flags[cp] |= _SENSITIVE
                if letter in "qv":
                    self.flags[cp] |= _BORDERED
        c = {letter: char_class(points) for letter, points in members.items()}
        # The runs of ctok's `_runs`: a letter run absorbs the marks after it, marks with no
        # letter before them open a run of their own; hard runs split by kind, and a
        # variation selector rides whichever hard run it follows.
        self.runs = re.compile(
            f"([{c['w']}][{c['w']}{c['m']}]*)|([{c['m']}]+)|([{c['d']}]+)|([{c['p']}]+)|([{c['s']}]+)"
            f"|([{c['h']}{c['v']}{_ASTRAL}]+)|([{c['n']}][{c['n']}{c['v']}]*)|([{c['q']}][{c['q']}{c['v']}]*)"
        )
        words = c["w"] + c["m"]
        punct = char_class(cp for cp in members["p"] if cp != ord("'"))
        digits, spaces = c["d"], c["s"]
        # A whitespace-free token falls into parts whose streams and tilings do not depend on
        # each other: it is cut between a letter and punctuation, between punctuation and a
        # letter, and on either side of a digit run; never next to an apostrophe
        # (contractions), never between a hard character and punctuation. Each pattern
        # matches one part: a character joins the part while the next one is no cut.
        self.parts = re.compile(
            f"(?:[{words}](?![{punct}{digits}])|[{punct}](?![{c['w']}{digits}])|[{digits}](?=[{digits}'])"
            f"|[^{words}{punct}{digits}{spaces}'](?![{digits}])|')*[^{spaces}]"
        )
        # The same on ASCII text, where hard characters and marks do not occur: a part is
        # one run of letters, digits or punctuation, joined to others only by apostrophes.
        ascii_run = r"[A-Za-z]+|[0-9]+|[!-&(-/:-@\[-`{-~]+"
        self.ascii_parts = re.compile(f"(?:{ascii_run}|'+(?:{ascii_run})?)(?:'+(?:{ascii_run})?)*")

    def split(self, run: str) -> list[str]:
        """The independent parts of a whitespace-free run."""
        parts: list[str] = (self.ascii_parts if run.isascii() else self.parts).findall(run)
        return parts

    def split_lazily(self, run: str) -> Iterator[str]:
        """The same parts one at a time, for runs too long to hold as a list of parts."""
        for match in (self.ascii_parts if run.isascii() else self.parts).finditer(run):
            yield match.group()

    def sensitive(self, ch: str) -> bool:
        """Whether a run starting or ending with `ch` takes border markers next to whitespace."""
        cp = ord(ch)
        return cp < _BMP and bool(self.flags[cp] & _SENSITIVE)

    def bordered(self, ch: str) -> bool:
        cp = ord(ch)
        return cp < _BMP and bool(self.flags[cp] & _BORDERED)


class Decorator:
    """The decorated runs of a text, by the rules of ctok 1.3.0's `stream_norm`."""

    def __init__(self, model: Any, tables: CharTables, *, case_cache: int = 65536) -> None:
        self._model = model
        self._tables = tables
        self._frame_bow = bool(model.frame_bow)
        self._case: dict[tuple[str, bool], tuple[str, str]] = {}
        self._case_cache = case_cache

    def runs(self, text: str) -> list[Run]:
        return [(_RUN_CLASSES[m.lastindex - 1], m.group()) for m in self._tables.runs.finditer(text)]  # type: ignore[operator]

    def stream(self, text: str) -> str:
        """ctok's marked stream of `text` (what `ctok.normalize.stream` returns)."""
        norm = ctok_normalize.nfc(text, fold_quotes=self._model.fold_quotes)
        norm = norm.translate(LITERAL_MARKER_ESCAPE_TABLE).rstrip("\n")
        prefix, out = self.decorate(norm, head=True, raw_head_space=text.startswith(" "))
        stream: str = SEAM_RE.sub(r"\1" + EOW_G + r"\2" + BOW_G, prefix + "".join(out))
        return stream

    def decorate(self, text: str, *, head: bool, raw_head_space: bool = False) -> tuple[str, list[str]]:
        """(what the message frame writes first, each run's decorated text) for escaped,
        normalised `text`. With `head`, `text` opens the message; otherwise whatever lies
        outside `text` is taken to be a word (never whitespace). Seams are not removed."""
        frame_bow = self._frame_bow
        if head and frame_bow and raw_head_space and text[:1] == " " and text[1:2] != " ":
            text = text[1:]  # the frame's ⟨bow⟩ stands for one leading space
        runs = self.runs(text)
        if not runs:
            return (BOW_G if head and frame_bow else ""), []
        prefix = self._frame_prefix(runs) if head else ""
        last = len(runs) - 1
        tables = self._tables
        out: list[str] = []
        append = out.append
        for i, (cls, body) in enumerate(runs):
            if cls == WORDY:
                fused = i > 0 and runs[i - 1][0] == STRAY
                pre, lowered = self._case_marked(body, fused)
                bow = "" if fused or ctok_normalize._contraction_seam(runs, i) else BOW_G
                append(pre + bow + lowered + EOW_G)
            elif cls == SPACE:
                append(body)
            elif cls == STRAY:
                letter_follows = i < last and runs[i + 1][0] == WORDY
                append(BOW_G + body + ("" if letter_follows else EOW_G))
            elif cls == PUNCT or tables.bordered(body[0]) or tables.bordered(body[-1]):
                takes_bow = (
                    _space_before(runs, i, head and frame_bow)
                    and not ctok_normalize._opens_word(runs, i)
                    and (cls == PUNCT or tables.bordered(body[0]))
                )
                takes_eow = _space_after(runs, i) and (cls == PUNCT or tables.bordered(body[-1]))
                append((BOW_G if takes_bow else "") + body + (EOW_G if takes_eow else ""))
            elif ctok_normalize._digit_run(body):  # a digit or hard run: numerals take borders
                bow = ctok_normalize._digit_bow(body) and _space_before(runs, i, head and frame_bow)
                eow = ctok_normalize._digit_eow(body) and _space_after(runs, i)
                append((BOW_G if bow else "") + body + (EOW_G if eow else ""))
            else:
                append(body)
        return prefix, out

    def _frame_prefix(self, runs: list[Run]) -> str:
        """What the message frame writes before the first run (its ⟨bow⟩, unless a run
        opens with one of its own; a space before a word-opening apostrophe)."""
        if not self._frame_bow:
            return ""
        first_cls, first = runs[0]
        head_quote = ctok_normalize._opens_word(runs, 0)
        has_own_bow = not head_quote and (
            first_cls in (WORDY, PUNCT, STRAY)
            or self._tables.bordered(first[0])
            or (first_cls in (DIGIT, HARD) and ctok_normalize._digit_bow(first))
            or (first_cls == SPACE and first[:1] == " ")
        )
        if has_own_bow:
            return ""
        return " " if head_quote else BOW_G

    def _case_marked(self, body: str, fused: bool) -> tuple[str, str]:
        """(case markers, body as written) for a letter run; ctok's `mark_case`, memoised."""
        key = (body, fused)
        hit = self._case.get(key)
        if hit is None:
            marked = ctok_normalize.mark_case(body, self._model.allcaps_min, head_mark=fused)
            pre = ""
            while marked[:1] in (SHIFT_G, CAPS_G):
                pre, marked = pre + marked[0], marked[1:]
            hit = (pre, marked)
            if len(self._case) >= self._case_cache:
                self._case.clear()
            self._case[key] = hit
        return hit


def _space_before(runs: list[Run], i: int, frame_is_space: bool) -> bool:
    """ctok's `borders_space(i, -1)`: the run before is whitespace ending in a space."""
    if i == 0:
        return frame_is_space
    cls, body = runs[i - 1]
    return cls == SPACE and body[-1:] == " "


def _space_after(runs: list[Run], i: int) -> bool:
    """ctok's `borders_space(i, +1)`: one space after (a run of spaces kills the marker)."""
    if i + 1 >= len(runs):
        return False
    cls, body = runs[i + 1]
    return cls == SPACE and body[:1] == " " and body[:2] != "  "
