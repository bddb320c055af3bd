# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact offline tokenizers, their loading, fallback, cap, cache and chunked counting."""

from __future__ import annotations

import base64
import functools
import gc
import gzip
import hashlib
import json
import logging
import shutil
import socket
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import tiktoken
import tiktoken.load
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import tokenizer as tokenizer_module
from opentelemetry.instrumentation.mcp_tokens.engine.estimate import EstimateTokenizer, estimate_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    BUNDLED,
    HuggingFaceTokenizer,
    TiktokenTokenizer,
    TokenCount,
    TokenCounter,
    Tokenizer,
    TokenizerLoader,
    TokenizerLoadError,
    TokenizerSpec,
    load_bundled_encoding,
    load_tokenizer,
)
from tiktoken_ext import openai_public

from .tokenizer_corpus import BOUNDARY_CHARS, corpus

ENCODINGS = ("o200k_base", "cl100k_base")
LOGGER = tokenizer_module.__name__


@functools.cache
def verified_ranks(name: str) -> dict[bytes, int]:
    """The bundled ranks, read the way tiktoken.load reads a file, after the hash check."""
    raw = gzip.decompress((tokenizer_module.DATA_DIR / f"{name}.tiktoken.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == BUNDLED[name].sha256
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in raw.splitlines() if line)
    }


@functools.cache
def plugin_definition(name: str) -> tuple[dict[str, Any], str]:
    """tiktoken's own definition of `name` (tiktoken_ext.openai_public) without network."""
    seen: dict[str, str] = {}

    def offline_load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["expected_hash"] = expected_hash or ""
        return verified_ranks(name)

    with mock.patch.object(openai_public, "load_tiktoken_bpe", offline_load):
        definition = getattr(openai_public, name)()
    return definition, seen["expected_hash"]


@functools.cache
def reference(name: str) -> tiktoken.Encoding:
    """tiktoken's Encoding built from tiktoken's own definition: the counts to match."""
    return tiktoken.Encoding(**plugin_definition(name)[0])


@functools.cache
def bundled(name: str) -> Tokenizer:
    tokenizer = load_tokenizer(TokenizerSpec(name))
    assert isinstance(tokenizer, TiktokenTokenizer)
    return tokenizer


def expected(name: str, text: str) -> int:
    return len(reference(name).encode_ordinary(text))


# --- bundled encodings -------------------------------------------------------------------


@pytest.mark.parametrize("name", ENCODINGS)
def test_bundled_encoding_matches_tiktokens_own_definition(name: str) -> None:
    """The drift test: pattern, specials, vocabulary and file hash equal tiktoken's."""
    definition, expected_hash = plugin_definition(name)
    ours = load_bundled_encoding(name)
    assert ours.name == definition["name"] == name
    assert ours._pat_str == definition["pat_str"]
    assert ours._special_tokens == definition["special_tokens"]
    assert ours.n_vocab == reference(name).n_vocab
    # The ranks live in the Rust core (the Python copy is dropped after loading): every
    # token of tiktoken's definition decodes from its rank to the same bytes.
    ranks = definition["mergeable_ranks"]
    assert ours.max_token_value >= max(ranks.values())
    assert all(ours.decode_single_token_bytes(rank) == token for token, rank in ranks.items())
    assert BUNDLED[name].sha256 == expected_hash


@pytest.mark.parametrize("name", ENCODINGS)
def test_counts_equal_tiktoken_on_a_randomized_corpus(name: str) -> None:
    counter = TokenCounter(bundled(name), cache_entries=0)
    chunked = TokenCounter(bundled(name), cache_entries=0, chunk_chars=64, threads=1)
    texts = corpus(seed=11, count=1000)
    for text in texts:
        assert counter.count(text) == TokenCount(expected(name, text), True), repr(text)
        assert chunked.count(text).tokens == expected(name, text), repr(text)
    assert sum(map(len, texts)) > 150_000


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(BOUNDARY_CHARS) | st.characters(exclude_categories=()), max_size=300))
def test_counts_equal_tiktoken_on_generated_text(text: str) -> None:
    for name in ENCODINGS:
        counted = TokenCounter(bundled(name), cache_entries=0, chunk_chars=16, threads=1).count(text)
        assert counted == TokenCount(expected(name, text), True)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize(("chunk_chars", "threads"), [(64, 2), (257, 1), (1024, 2), (4096, 1)])
def test_chunked_total_equals_unchunked_total(name: str, chunk_chars: int, threads: int) -> None:
    text = "\n".join(corpus(seed=chunk_chars, count=500))
    counter = TokenCounter(bundled(name), cache_entries=0, chunk_chars=chunk_chars, threads=threads)
    assert len(text) > 25 * chunk_chars
    assert counter.count(text) == TokenCount(expected(name, text), True)


def test_lone_surrogates_count_as_tiktoken_maps_them() -> None:
    for text in ("\ud800", "a\udfffb", "\ud83d\ude00 x", "x \ud83d", "\udc00\ud800" * 50, "日本\ud800語"):
        for name in ENCODINGS:
            assert bundled(name).count(text) == expected(name, text)
            assert TokenCounter(bundled(name), chunk_chars=2).count(text).tokens == expected(name, text)


def test_public_list_path_counts_the_same_as_the_token_buffer() -> None:
    # Without tiktoken's private token buffer the tokenizer uses encode_ordinary itself.
    for name in ENCODINGS:
        fast = bundled(name)
        assert isinstance(fast, TiktokenTokenizer) and fast._count_native is not None
        with mock.patch.object(tokenizer_module, "_buffer_counter", lambda encoding: None):
            plain = TiktokenTokenizer(fast.encoding)
        assert plain._count_native is None
        for text in corpus(seed=12, count=60):
            assert plain.count(text) == fast.count(text) == expected(name, text)


def test_a_token_buffer_that_disagrees_is_not_used() -> None:
    class WrongBuffer:
        def encode_to_tiktoken_buffer(self, text: str, allowed: object) -> bytes:
            return b"\0" * 4 * (len(text) + 1)

    class Encoding:
        name = "fake"
        _core_bpe = WrongBuffer()

        def encode_ordinary(self, text: str) -> list[int]:
            return list(range(len(text.split())))

    tokenizer = TiktokenTokenizer(Encoding())  # type: ignore[arg-type]
    assert tokenizer._count_native is None
    assert tokenizer.count("three words here") == 3


def test_every_tokenizer_satisfies_the_protocol() -> None:
    for tokenizer in (bundled("o200k_base"), bundled("cl100k_base"), EstimateTokenizer()):
        assert isinstance(tokenizer, Tokenizer)
    assert TokenizerSpec() == TokenizerSpec("o200k_base", None, None)


def test_a_huggingface_tokenizer_satisfies_the_protocol(tmp_path: Path) -> None:
    path = tmp_path / "tokenizer.json"
    tiny_huggingface_tokenizer().save(str(path))
    tokenizer = load_tokenizer(TokenizerSpec(path=str(path)))
    assert isinstance(tokenizer, HuggingFaceTokenizer)
    assert isinstance(tokenizer, Tokenizer)


def test_bundled_loading_needs_no_network_and_writes_no_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: object, **kwargs: object) -> Any:
        raise AssertionError("network or tiktoken's loader was used")

    for env in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        monkeypatch.setenv(env, str(tmp_path))
    monkeypatch.setattr(tiktoken, "get_encoding", forbidden)
    monkeypatch.setattr(tiktoken.load, "load_tiktoken_bpe", forbidden)
    monkeypatch.setattr(tiktoken.load, "read_file_cached", forbidden)
    monkeypatch.setattr(socket.socket, "connect", forbidden)
    encoding = load_bundled_encoding("cl100k_base")
    assert encoding.encode_ordinary("hello world") == reference("cl100k_base").encode_ordinary("hello world")
    assert list(tmp_path.iterdir()) == []


def test_importing_the_module_loads_nothing() -> None:
    script = """
import sys
opened = []
sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == "open" else None)
import opentelemetry.instrumentation.mcp_tokens.engine.tokenizer
print([m for m in ("tiktoken", "tokenizers") if m in sys.modules])
print([path for path in opened if path.endswith((".gz", ".tiktoken", ".json"))])
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.split("\n")[:2] == ["[]", "[]"]


# --- fallback ----------------------------------------------------------------------------


def copy_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = tmp_path / "data"
    shutil.copytree(tokenizer_module.DATA_DIR, data)
    monkeypatch.setattr(tokenizer_module, "DATA_DIR", data)
    return data


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def assert_estimate(tokenizer: Tokenizer) -> None:
    assert isinstance(tokenizer, EstimateTokenizer)
    assert (tokenizer.name, tokenizer.exact) == ("estimate", False)
    text = '{"a": [1, 2, 3], "b": "some text"}'
    assert TokenCounter(tokenizer).count(text) == TokenCount(estimate_tokens(text), False)


def test_tampered_rank_file_falls_back_to_the_estimate_with_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = copy_data(tmp_path, monkeypatch)
    raw = bytearray(gzip.decompress((data / "o200k_base.tiktoken.gz").read_bytes()))
    raw[1000] ^= 0x01  # one bit, still a valid gzip and a parseable file
    (data / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(bytes(raw), compresslevel=1))
    with pytest.raises(TokenizerLoadError, match="sha256"):
        load_bundled_encoding("o200k_base")
    caplog.clear()
    assert_estimate(load_tokenizer(TokenizerSpec("o200k_base")))
    [warning] = warnings_of(caplog)
    assert "sha256" in warning
    assert "o200k_base" in warning


@pytest.mark.parametrize("damage", ["truncated", "missing", "not gzip"])
def test_unreadable_rank_file_falls_back(
    damage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = copy_data(tmp_path, monkeypatch) / "cl100k_base.tiktoken.gz"
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:5000])
    elif damage == "missing":
        path.unlink()
    else:
        path.write_bytes(b"IQ== 0\n")
    assert_estimate(load_tokenizer(TokenizerSpec("cl100k_base")))
    assert len(warnings_of(caplog)) == 1


def test_unknown_encoding_falls_back_naming_it(caplog: pytest.LogCaptureFixture) -> None:
    assert_estimate(load_tokenizer(TokenizerSpec("p50k_base")))
    [warning] = warnings_of(caplog)
    assert "p50k_base" in warning


class RaisingTokenizer:
    """A tokenizer that fails on every text, to prove no exception leaves TokenCounter."""

    name = "raising"
    exact = True

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def count(self, text: str) -> int:
        raise self.error


class PanicLike(BaseException):
    """Like pyo3's PanicException, which does not derive from Exception."""


@pytest.mark.parametrize("error", [RuntimeError("boom"), MemoryError(), PanicLike("panic")])
def test_an_internal_error_makes_that_count_an_estimate_logged_once(
    error: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    counter = TokenCounter(RaisingTokenizer(error))
    for text in ("hello world", "x" * 100_000):
        assert counter.count(text) == TokenCount(estimate_tokens(text), False)
    assert len(warnings_of(caplog)) == 1


def test_non_str_input_does_not_raise() -> None:
    counter = TokenCounter(bundled("o200k_base"))
    for value in (None, b"bytes", 42):
        assert counter.count(value).exact is False  # type: ignore[arg-type]


# --- cap ---------------------------------------------------------------------------------


def test_texts_over_max_bytes_are_estimated_and_flagged() -> None:
    counter = TokenCounter(bundled("o200k_base"), max_bytes=100)
    for text, exact in (
        ("a" * 100, True),
        ("a" * 101, False),
        ("é" * 50, True),  # 50 characters, 100 bytes
        ("é" * 51, False),  # 51 characters, 102 bytes
        ("😀" * 25, True),
        ("😀" * 25 + "a", False),
        ("\ud800" * 33, True),  # counted as 3 bytes each, as the U+FFFD tiktoken makes of them
        ("\ud800" * 34, False),
    ):
        counted = counter.count(text)
        assert counted.exact is exact, text
        assert counted.tokens == (expected("o200k_base", text) if exact else estimate_tokens(text))


def test_default_cap_is_32_mib() -> None:
    counter = TokenCounter(bundled("o200k_base"), cache_entries=0)
    assert counter.max_bytes == 32 * 1024 * 1024
    assert counter.count(" " * (counter.max_bytes + 1)).exact is False


@pytest.mark.parametrize(
    "kwargs",
    [{"max_bytes": 0}, {"chunk_chars": 0}, {"threads": 0}, {"cache_entries": -1}, {"cacheable_chars": -1}],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        TokenCounter(bundled("o200k_base"), **kwargs)


# --- cache -------------------------------------------------------------------------------


def test_cache_hits_return_the_same_count() -> None:
    counter = TokenCounter(bundled("o200k_base"))
    text = json.dumps({"name": "search_issues", "description": "Search issues. " * 20})
    first = counter.count(text)
    assert counter.count(text) == first == TokenCount(expected("o200k_base", text), True)
    info = counter.cache_info()
    assert (info.hits, info.misses, info.entries) == (1, 1, 1)


def test_cache_is_bounded_by_entries_and_keeps_no_text_alive() -> None:
    counter = TokenCounter(bundled("o200k_base"), cache_entries=3)
    texts = [f"{i:02d}" + "x" * 38 for i in range(20)]
    counted = [_Text(text) for text in texts]  # a plain str cannot be weakly referenced
    survivors = [weakref.ref(text) for text in counted]
    for text in counted:
        assert counter.count(text).tokens == expected("o200k_base", text)
    del counted, text
    gc.collect()
    assert counter.cache_info().entries == 3
    assert all(ref() is None for ref in survivors)
    assert counter.count(texts[-1]) == TokenCount(expected("o200k_base", texts[-1]), True)
    assert counter.cache_info().hits == 1  # an equal string, another object: a hit


class _Text(str):
    """A str that can be weakly referenced, to see whether the cache keeps it."""

    __slots__ = ("__weakref__",)


def test_cache_evicts_the_least_recently_used() -> None:
    counter = TokenCounter(bundled("o200k_base"), cache_entries=2)
    counter.count("first text")
    counter.count("second text")
    counter.count("first text")  # now the most recent
    counter.count("third text")  # evicts "second text"
    hits = counter.cache_info().hits
    counter.count("first text")
    counter.count("second text")
    assert counter.cache_info().hits == hits + 1


def test_a_long_text_counted_again_is_answered_from_the_cache() -> None:
    # Both sides of an in-process call hand the counter the same result: counted once.
    counter = TokenCounter(bundled("o200k_base"))
    text = "The quarterly report lists revenue by region and product line. " * 20_000  # 1.2M chars
    first = counter.count(text)
    copy = text[:1000] + text[1000:]  # an equal text in another object, as unpickled
    assert copy is not text
    assert counter.count(copy) == first and first.exact
    assert (counter.cache_info().hits, counter.cache_info().misses) == (1, 1)
    other = text[:-1] + "!"  # same length, other text
    assert counter.count(other).tokens != 0
    assert counter.cache_info().misses == 2


def test_strings_over_cacheable_chars_are_not_cached_and_cache_can_be_off() -> None:
    counter = TokenCounter(bundled("o200k_base"), cacheable_chars=10)
    counter.count("x" * 11)
    counter.count("x" * 11)
    assert counter.cache_info().entries == 0
    off = TokenCounter(bundled("o200k_base"), cache_entries=0)
    off.count("short")
    off.count("short")
    assert (off.cache_info().hits, off.cache_info().entries) == (0, 0)


def test_cache_is_consistent_under_threads() -> None:
    counter = TokenCounter(bundled("o200k_base"), cache_entries=50)
    texts = [f"text number {i} " * (i % 7 + 1) for i in range(200)]
    wrong: list[str] = []

    def hammer(offset: int) -> None:
        for i in range(2000):
            text = texts[(i * 7 + offset) % len(texts)]
            if counter.count(text).tokens != expected("o200k_base", text):
                wrong.append(text)

    workers = [threading.Thread(target=hammer, args=(n,)) for n in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    info = counter.cache_info()
    assert wrong == []
    assert info.hits + info.misses == 12_000
    assert info.entries <= 50


# --- background loading ------------------------------------------------------------------


def test_loader_loads_in_the_background_once() -> None:
    release = threading.Event()
    calls: list[TokenizerSpec] = []

    def slow_load(spec: TokenizerSpec) -> Tokenizer:
        calls.append(spec)
        release.wait(10)
        return bundled("cl100k_base")

    with mock.patch.object(tokenizer_module, "_load_exact", slow_load):
        loader = TokenizerLoader(TokenizerSpec("cl100k_base"))
        assert not loader.ready()
        loader.start()
        loader.start()
        assert not loader.ready()
        assert not loader.wait(0.01)  # its timeout, not the loading (which waits for `release`)
        release.set()
        assert loader.wait(10)
    assert loader.ready()
    assert loader.tokenizer() is bundled("cl100k_base")
    assert loader.error is None
    assert len(calls) == 1
    assert loader._thread is not None and loader._thread.daemon


def test_loader_run_loads_on_this_thread_and_nothing_loads_again() -> None:
    calls: list[TokenizerSpec] = []
    loaded = EstimateTokenizer()

    def load(spec: TokenizerSpec) -> Tokenizer:
        calls.append(spec)
        return loaded

    with mock.patch.object(tokenizer_module, "_load_exact", load):
        loader = TokenizerLoader(TokenizerSpec("cl100k_base"))
        loader.run()  # the counting service loads before it forks: no thread may be left
        assert loader.tokenizer() is loaded
        loader.start()
    assert len(calls) == 1 and loader._thread is None


def test_loader_tokenizer_starts_loading_and_reports_failures(caplog: pytest.LogCaptureFixture) -> None:
    loader = TokenizerLoader(TokenizerSpec("o200k_base", path="/nonexistent/tokenizer.json"))
    assert_estimate(loader.tokenizer())
    assert loader.ready()
    assert loader.error is not None and "nonexistent" in loader.error
    [warning] = warnings_of(caplog)
    assert "nonexistent" in warning


def test_loader_really_loads_o200k() -> None:
    loader = TokenizerLoader(TokenizerSpec())
    loader.start()
    assert loader.wait(30)
    assert (loader.tokenizer().name, loader.tokenizer().exact) == ("o200k_base", True)


# --- user tokenizer files ----------------------------------------------------------------


def write_bpe(path: Path, ranks: dict[bytes, int], compress: bool = False) -> Path:
    lines = b"".join(
        base64.b64encode(token) + b" " + str(rank).encode() + b"\n" for token, rank in ranks.items()
    )
    path.write_bytes(gzip.compress(lines) if compress else lines)
    return path


@pytest.mark.parametrize(("pattern", "compress"), [("cl100k", True), (None, False)])
def test_tiktoken_bpe_file_with_cl100k_ranks_counts_like_cl100k(
    tmp_path: Path, pattern: str | None, compress: bool
) -> None:
    path = write_bpe(tmp_path / "my-vocab.tiktoken", verified_ranks("cl100k_base"), compress)
    tokenizer = load_tokenizer(TokenizerSpec(path=str(path), pattern=pattern))
    assert (tokenizer.name, tokenizer.exact) == ("my-vocab", True)
    counter = TokenCounter(tokenizer, chunk_chars=128)
    for text in corpus(seed=5, count=150):
        assert counter.count(text) == TokenCount(expected("cl100k_base", text), True)


def test_llama3_family_builds_its_specials_after_the_ranks(tmp_path: Path) -> None:
    path = write_bpe(tmp_path / "tokenizer.model", verified_ranks("cl100k_base"))
    tokenizer = load_tokenizer(TokenizerSpec(encoding="llama-3.2", path=str(path), pattern="llama3"))
    assert isinstance(tokenizer, TiktokenTokenizer)
    assert tokenizer.name == "llama-3.2"
    assert tokenizer.encoding.n_vocab == 100_256 + 256
    assert tokenizer.encoding._special_tokens["<|begin_of_text|>"] == 100_256
    assert tokenizer.encoding._pat_str == tokenizer_module.LLAMA3_PAT_STR
    text = "\n".join(corpus(seed=6, count=200))
    whole = TokenCounter(tokenizer, chunk_chars=len(text)).count(text)
    assert TokenCounter(tokenizer, chunk_chars=100).count(text) == whole


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"IQ== 0\nIg== 1\nnot-a-line\n", "line 3"),
        (b"IQ== 0\nIg== x\n", "line 2"),
        (b"IQ== 0\nIg== 0\n", "share a rank"),
        (b"IQ== 0\nIg== 1\n", "single-byte tokens missing"),
    ],
)
def test_malformed_bpe_files_fall_back_naming_the_problem(
    tmp_path: Path, content: bytes, message: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    assert_estimate(load_tokenizer(TokenizerSpec(path=str(path), pattern="o200k")))
    [warning] = warnings_of(caplog)
    assert message in warning
    assert str(path) in warning


def test_bpe_file_of_unknown_size_needs_a_pattern(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ranks = {bytes([b]): b for b in range(256)}
    path = write_bpe(tmp_path / "bytes.tiktoken", ranks)
    assert_estimate(load_tokenizer(TokenizerSpec(path=str(path))))
    assert "set the pattern" in warnings_of(caplog)[0]
    caplog.clear()
    assert_estimate(load_tokenizer(TokenizerSpec(path=str(path), pattern="gpt5")))
    assert "gpt5" in warnings_of(caplog)[0]
    byte_level = load_tokenizer(TokenizerSpec(path=str(path), pattern="o200k"))
    assert byte_level.exact and byte_level.count("héllo") == len("héllo".encode())


@functools.cache
def tiny_huggingface_tokenizer() -> Any:
    """A real BPE tokenizer.json, trained here, offline, on the test corpus; the test that
    asks for it is skipped where the optional `huggingface` extra is not installed."""
    pytest.importorskip("tokenizers", reason="needs the optional `huggingface` extra (tokenizers)")
    from tokenizers import Tokenizer as HfTokenizer  # noqa: PLC0415
    from tokenizers import models, pre_tokenizers, trainers  # noqa: PLC0415

    tokenizer = HfTokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<|begin_of_text|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = [
        text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        for text in corpus(seed=7, count=300)
    ]
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def test_huggingface_tokenizer_json_counts_like_the_library(tmp_path: Path) -> None:
    library = tiny_huggingface_tokenizer()
    (tmp_path / "Tiny-BPE").mkdir()
    path = tmp_path / "Tiny-BPE" / "tokenizer.json"
    library.save(str(path))
    tokenizer = load_tokenizer(TokenizerSpec(path=str(path)))
    assert isinstance(tokenizer, HuggingFaceTokenizer)
    assert (tokenizer.name, tokenizer.exact) == ("Tiny-BPE", True)
    counter = TokenCounter(tokenizer, chunk_chars=64)
    for text in corpus(seed=8, count=200):
        clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        assert counter.count(text) == TokenCount(
            len(library.encode(clean, add_special_tokens=False).ids), True
        )
    named = load_tokenizer(TokenizerSpec(encoding="my-llama", path=str(path)))
    assert named.name == "my-llama"


def test_huggingface_truncation_in_the_file_is_ignored(tmp_path: Path) -> None:
    library = tiny_huggingface_tokenizer()
    path = tmp_path / "truncating.json"
    library.enable_truncation(max_length=8)
    try:
        library.save(str(path))
    finally:
        library.no_truncation()
    text = "the token engine counts what a model is shown " * 20
    assert load_tokenizer(TokenizerSpec(path=str(path))).count(text) == len(library.encode(text).ids) > 8


def test_huggingface_file_without_the_library_falls_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "tokenizer.json"
    tiny_huggingface_tokenizer().save(str(path))
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    assert_estimate(load_tokenizer(TokenizerSpec(path=str(path))))
    assert "tokenizers" in warnings_of(caplog)[0]


# --- memory ------------------------------------------------------------------------------

MEMORY_SCRIPT = """
import gc, json, random, threading, time, tracemalloc
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter, TokenizerSpec, load_tokenizer)

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

def peak_rss_during(work):
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the kernel's own peak
        work()
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM"))
    except OSError:  # no resettable peak: sample instead
        peak, done = [rss()], threading.Event()
        def sample():
            while not done.is_set():
                peak.append(rss()); time.sleep(0.001)
        sampler = threading.Thread(target=sample); sampler.start()
        work(); done.set(); sampler.join()
        return max(peak)

rng = random.Random(3)
words = "alpha beta gamma delta status pending shipped customer order invoice".split()
records = [{"id": i, "name": rng.choice(words), "note": " ".join(rng.choices(words, k=8)),
            "total": round(rng.random() * 1e4, 2), "tags": rng.choices(words, k=3)} for i in range(140_000)]
payload = json.dumps(records, indent=2)[: 20_000_000]
del records
counter = TokenCounter(load_tokenizer(TokenizerSpec("o200k_base")), cache_entries=0)
gc.collect()
result = []
baseline = rss()
peak = peak_rss_during(lambda: result.append(counter.count(payload)))
tracemalloc.start()
counter.count(payload)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"rss_above_baseline": peak - baseline, "traced_peak": traced, "tokens": result[0].tokens,
                  "exact": result[0].exact, "chars": len(payload)}))
"""


@pytest.mark.slow
def test_counting_20_mb_stays_under_64_mib_above_baseline() -> None:
    run = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT], capture_output=True, text=True, timeout=180, check=True
    )
    measured = json.loads(run.stdout)
    assert measured["chars"] == 20_000_000
    assert measured["exact"] is True
    assert measured["tokens"] > 4_000_000
    assert measured["rss_above_baseline"] < 64 * 1024 * 1024, measured
    assert measured["traced_peak"] < 64 * 1024 * 1024, measured


def test_non_ascii_text_is_tokenised_in_shorter_chunks(o200k) -> None:  # type: ignore[no-untyped-def]
    # tiktoken copies non-ASCII text to UTF-8 before it releases the GIL: such text goes in
    # shorter chunks than ASCII text, and the total stays exact.
    seen: list[int] = []
    tokenizer = load_tokenizer(TokenizerSpec("o200k_base"))
    real = tokenizer.count

    class Recording:
        exact = True
        chunkable = True
        name = tokenizer.name

        def count(self, text: str) -> int:
            seen.append(len(text))
            return real(text)

    counter = TokenCounter(
        Recording(), cache_entries=0, chunk_chars=1 << 20, non_ascii_chunk_chars=4096, threads=1
    )
    prose = "数据分析报告显示，本季度销售额增长。Revenue grew 12%, costs 3%. " * 6_000
    assert counter.count(prose).tokens == len(o200k.encode_ordinary(prose))
    assert len(seen) > 10 and max(seen) < 4096 + 1024
    seen.clear()
    ascii_text = "Revenue grew 12%, costs 3%. " * 20_000
    assert counter.count(ascii_text).tokens == len(o200k.encode_ordinary(ascii_text))
    assert seen == [len(ascii_text)]
