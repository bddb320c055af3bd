# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact cut points: every cut the engine finds leaves tiktoken's count unchanged."""

from __future__ import annotations

import functools
import gzip
import itertools
import re
import threading
import time
import unicodedata

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import chunking
from opentelemetry.instrumentation.mcp_tokens.engine import tokenizer as tokenizer_module
from opentelemetry.instrumentation.mcp_tokens.engine.chunking import (
    chunk_cuts,
    count_in_chunks,
    next_cut,
    utf8_size_exceeds,
)
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    LLAMA3_PAT_STR,
    load_bundled_encoding,
    parse_tiktoken_bpe,
)

from .tokenizer_corpus import BOUNDARY_CHARS, corpus

PATTERNS = ("o200k_base", "cl100k_base", "llama3")


@functools.cache
def encoding(name: str) -> tiktoken.Encoding:
    if name == "llama3":  # the cut rules depend on the pattern, not on the ranks
        data = gzip.decompress((tokenizer_module.DATA_DIR / "cl100k_base.tiktoken.gz").read_bytes())
        ranks = parse_tiktoken_bpe(data, "cl100k_base")
        return tiktoken.Encoding(
            "llama3-test", pat_str=LLAMA3_PAT_STR, mergeable_ranks=ranks, special_tokens={}
        )
    return load_bundled_encoding(name)


def tokens(name: str, text: str) -> int:
    return len(encoding(name).encode_ordinary(text))


def all_cuts(text: str) -> list[int]:
    cuts, position = [], 1
    while (cut := next_cut(text, position)) is not None:
        cuts.append(cut)
        position = cut + 1
    return cuts


def split_at(text: str, cuts: list[int]) -> list[str]:
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("name", PATTERNS)
def test_every_cut_in_the_corpus_keeps_the_count(name: str) -> None:
    texts = corpus(seed=1, count=300)
    total_cuts = 0
    for text in texts:
        cuts = all_cuts(text)
        total_cuts += len(cuts)
        assert sum(tokens(name, piece) for piece in split_at(text, cuts)) == tokens(name, text), repr(text)
    assert total_cuts > 5_000  # the corpus really exercises the rules


@pytest.mark.parametrize("name", PATTERNS)
def test_each_cut_on_its_own_keeps_the_count(name: str) -> None:
    for text in corpus(seed=2, count=40):
        whole = tokens(name, text)
        for cut in all_cuts(text):
            assert tokens(name, text[:cut]) + tokens(name, text[cut:]) == whole, (repr(text), cut)


boundary_text = st.text(
    alphabet=st.sampled_from(BOUNDARY_CHARS) | st.characters(exclude_categories=()), max_size=60
)


@settings(max_examples=300, deadline=None)
@given(boundary_text)
def test_cuts_in_generated_text_keep_the_count(text: str) -> None:
    cuts = all_cuts(text)
    assert all(0 < cut < len(text) for cut in cuts)
    for name in PATTERNS:
        assert sum(tokens(name, piece) for piece in split_at(text, cuts)) == tokens(name, text)


@settings(max_examples=150, deadline=None)
@given(boundary_text, st.integers(min_value=1, max_value=16))
def test_chunked_count_equals_the_whole_count(text: str, chunk_chars: int) -> None:
    for name in ("o200k_base", "cl100k_base"):
        count = functools.partial(tokens, name)
        assert count_in_chunks(count, text, chunk_chars, threads=1) == tokens(name, text)


def test_positions_the_rules_refuse_would_change_counts() -> None:
    # What the rules guard against, so this file would notice rules that were too loose.
    assert tokens("o200k_base", "hel") + tokens("o200k_base", "lo") != tokens("o200k_base", "hello")
    assert tokens("o200k_base", "a\n") + tokens("o200k_base", "\nb") != tokens("o200k_base", "a\n\nb")
    assert tokens("o200k_base", "x;\n") + tokens("o200k_base", "/") != tokens("o200k_base", "x;\n/")
    assert all_cuts("hello") == []
    assert all_cuts("a\n\nb") == [3]
    assert all_cuts("x;\n/") == [1]


@pytest.mark.parametrize(
    "text", ["a" * 5000, " " * 5000, "!" * 5000, "\n" * 5000, "a\u0301" * 2000, "日本" * 2000]
)
def test_text_without_a_cut_stays_whole(text: str) -> None:
    assert next_cut(text, 1) is None
    assert chunk_cuts(text, 64) == []


def test_chunks_are_at_least_chunk_chars_and_barely_more_on_json() -> None:
    text = "".join(t for t in corpus(seed=3, count=400) if t.startswith(("{", "[")))
    cuts = chunk_cuts(text, 512)
    sizes = [b - a for a, b in itertools.pairwise([0, *cuts])]
    assert len(cuts) > 20
    assert all(512 <= size < 512 + 64 for size in sizes)


def test_cuts_come_every_chunk_on_json_lines_and_never_in_hostile_runs() -> None:
    # What finding them costs: tests.bench.engine_bounds.
    payload = ('{"id": 12345, "name": "alpha beta", "tags": ["x", "y"], "v": 0.125}\n' * 60_000)[: 4 << 20]
    cuts = chunk_cuts(payload, 1 << 16)
    assert all(1 << 16 <= b - a < (1 << 16) + 100 for a, b in itertools.pairwise([0, *cuts]))
    assert len(payload) - cuts[-1] < 2 << 16
    for hostile in ("a" * (2 << 20), " " * (2 << 20), "!a\u0301" * (1 << 19)):
        assert chunk_cuts(hostile, 1 << 16) == []


def test_listed_characters_have_the_class_the_rules_assume() -> None:
    for listed, categories in ((chunking._LETTERS, "L"), (chunking._DIGITS, "N"), (chunking._SYMBOLS, "PS")):
        chars = _expand(listed)
        assert chars
        assert all(unicodedata.category(char)[0] in categories for char in chars)
    assert "'" not in _expand(chunking._SYMBOLS)


@pytest.mark.parametrize("name", ["cl100k_base", "llama3"])
def test_tiktoken_splits_the_listed_characters_as_the_rules_assume(name: str) -> None:
    # cl100k's pattern puts "'s" in a piece of its own after a letter or digit, but glues
    # "'" to a preceding punctuation-class character; so this fails for any listed letter
    # or digit that the installed tiktoken (its Unicode tables) does not see as one.
    count = encoding(name).encode_ordinary
    contraction = len(count("'s"))
    for char in _expand(chunking._LETTERS) + _expand(chunking._DIGITS):
        assert len(count(char + "'s")) == len(count(char)) + contraction, hex(ord(char))
    letter = len(count("a"))
    for char in _expand(chunking._SYMBOLS):
        assert len(count("a" + char)) == letter + len(count(char)), hex(ord(char))


@functools.cache
def _expand(listed: str) -> str:
    pattern = re.compile(f"[{listed}]")
    assert "\\U" not in listed.replace("\\U0001f", "")  # nothing listed past U+1FFFF
    return "".join(chr(c) for c in range(0x20000) if not 0xD800 <= c <= 0xDFFF and pattern.match(chr(c)))


def test_count_in_chunks_runs_at_most_threads_chunks_at_once() -> None:
    text = "word, " * 4000
    active = peak = 0
    lock = threading.Lock()

    def slow_count(chunk: str) -> int:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.002)
        with lock:
            active -= 1
        return len(chunk)

    assert count_in_chunks(slow_count, text, 500, threads=2) == len(text)
    assert peak == 2
    assert count_in_chunks(slow_count, text, 500, threads=1) == len(text)


def test_count_in_chunks_passes_worker_errors_on() -> None:
    def broken(chunk: str) -> int:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        count_in_chunks(broken, "a, " * 100, 10, threads=2)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(exclude_categories=()), max_size=50), st.integers(0, 250))
def test_utf8_size_check_matches_encoding(text: str, limit: int) -> None:
    assert utf8_size_exceeds(text, limit) == (len(text.encode("utf-8", "surrogatepass")) > limit)


def test_utf8_size_check_measures_large_texts_in_slices() -> None:
    text = "é" * 600_000 + "\ud800" * 10  # 1_200_030 bytes
    assert utf8_size_exceeds(text, 1_200_029)
    assert not utf8_size_exceeds(text, 1_200_030)


def test_utf8_size_check_does_not_encode_clear_cases() -> None:
    class NoEncode(str):
        def encode(self, *args: object, **kwargs: object) -> bytes:
            raise AssertionError("encoded")

    assert utf8_size_exceeds(NoEncode("é" * 10), 9)
    assert not utf8_size_exceeds(NoEncode("é" * 10), 40)
    assert not utf8_size_exceeds(NoEncode("a" * 10), 20)


def test_chunk_chars_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chunk_chars"):
        chunk_cuts("abc", 0)


def test_a_text_without_cuts_is_searched_in_bounded_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    # No cut anywhere (letters and a format character tiktoken keeps in one piece): the search
    # must still be linear and made of short regex searches, each of which keeps the GIL.
    text = "note\u200b" * 100_000
    windows: list[int] = []
    real = chunking._first_cut_in

    def recording(text: str, low: int, high: int) -> int | None:
        windows.append(high - low)
        return real(text, low, high)

    monkeypatch.setattr(chunking, "_first_cut_in", recording)
    assert chunking.next_cut(text, 1) is None
    assert max(windows) <= chunking.MAX_WINDOW
    assert sum(windows) <= len(text) + len(windows)
