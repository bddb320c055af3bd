# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact counts and cuts for the guard, in the application's process, as bounded as they can be.

The analysis counts in its helper process, after the response; the guard must decide on
the response path, so it keeps a tokenizer of its own (`TokenizerLoader`, started on a
daemon thread when the patches are installed with a guard on) and counts only what deciding and
cutting need:

- a text whose UTF-8 size is at most the budget fits (every token is at least one byte);
- a text longer than the budget times the encoding's longest token (in bytes; 128 for
  o200k_base and cl100k_base) cannot fit;
- otherwise the text is counted in growing prefixes that end at exact cut points
  (engine/chunking.py: the count of a prefix ending there is a lower bound of the whole
  text's), stopping as soon as one exceeds the budget.

A cut is made at a token boundary of the text's own tokenization, at a character (never
inside a UTF-8 sequence), and the prefix is then counted on its own: that count, not the
position, is what the delivered result is held to.

Only tiktoken encodings are supported (bundled or a BPE file): their longest token bounds
every count from below. Anything else makes the guard fail open (`no_exact_tokenizer`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.chunking import next_cut
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TiktokenTokenizer,
    TokenCounter,
    TokenizerLoader,
    TokenizerSpec,
)

_logger = logging.getLogger(__name__)

# The first prefix counted is this many characters per token of budget (typical text runs
# 3-5); each next one is twice as long.
_FIRST_CHARS_PER_TOKEN = 4
_MIN_PREFIX_CHARS = 4096
# Attempts at shortening a cut whose own count came out over budget (re-tokenising a
# prefix can merge differently at its end), before halving the prefix instead.
_SHORTEN_ATTEMPTS = 8


class TokenizerUnavailable(Exception):
    """No exact tiktoken tokenizer is ready: the guard delivers results unchanged."""


class InexactCount(Exception):
    """The counter fell back to an estimate for a text: the guard cannot hold a limit."""


class GuardTokenizer:
    """The guard's tokenizer: loaded on a daemon thread, waited for a bounded time."""

    def __init__(self, spec: TokenizerSpec, *, max_bytes: int, wait_s: float) -> None:
        self._loader = TokenizerLoader(spec)
        self._max_bytes = max_bytes
        self._wait_s = wait_s
        self._measure: Measure | None = None
        self._failed = False
        self._lock = threading.Lock()

    def start(self) -> None:
        self._loader.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the tokenizer has loaded (tests, benchmarks); whether it has."""
        return self._loader.wait(timeout)

    def measure(self) -> Measure:
        """The ready `Measure`; raises TokenizerUnavailable when none is (or will be)."""
        measure = self._measure
        if measure is not None:
            return measure
        if self._failed or not self._loader.wait(self._wait_s):
            raise TokenizerUnavailable("the guard's tokenizer is not loaded yet")
        with self._lock:
            if self._measure is None and not self._failed:
                self._measure = _measure_of(self._loader, self._max_bytes)
                self._failed = self._measure is None
        if self._measure is None:
            raise TokenizerUnavailable("no exact tiktoken tokenizer could load")
        return self._measure


def _measure_of(loader: TokenizerLoader, max_bytes: int) -> Measure | None:
    tokenizer = loader.tokenizer()
    if not isinstance(tokenizer, TiktokenTokenizer):
        _logger.warning(
            "mcp-tokens: the guard needs a tiktoken tokenizer (bundled or a BPE file), not %s; "
            "results are delivered unguarded",
            tokenizer.name,
        )
        return None
    counter = TokenCounter(tokenizer, max_bytes=max_bytes, threads=1, cache_entries=256)
    return Measure(counter, tokenizer.encoding, max(map(len, tokenizer.encoding.token_byte_values())))


class Measure:
    """Exact counts (never estimates: those raise `InexactCount`) and cuts of texts."""

    def __init__(self, counter: TokenCounter, encoding: Any, max_token_bytes: int) -> None:
        self._counter = counter
        self._encoding = encoding
        self.max_token_bytes = max(1, max_token_bytes)
        self.name = counter.name

    def count(self, text: str) -> int:
        counted = self._counter.count(text)
        if not counted.exact:
            raise InexactCount(f"a text of {len(text)} characters was estimated")
        return counted.tokens

    def count_upto(self, text: str, budget: int) -> int | None:
        """The exact tokens of `text` when at most `budget`, else None (it is over)."""
        length = len(text)
        if length > budget * self.max_token_bytes:
            return None  # at least length / max_token_bytes tokens
        size = min(length, self.first_size(budget))
        while True:
            if size >= length:
                tokens = self.count(text)
                return tokens if tokens <= budget else None
            end = next_cut(text, size)
            if end is None:
                size = length
                continue
            if self.count(text[:end]) > budget:
                return None  # a prefix ending at an exact cut counts at most the whole
            size = 2 * end

    def first_size(self, budget: int) -> int:
        return max(_MIN_PREFIX_CHARS, budget * _FIRST_CHARS_PER_TOKEN)

    def prefix(self, text: str, budget: int) -> tuple[int, int]:
        """(characters, tokens) of a prefix of `text` that ends at a token boundary of the
        text's tokenization and counts at most `budget` tokens on its own."""
        if budget <= 0 or not text:
            return 0, 0
        # No prefix past this many characters can fit: each token is at most that many bytes.
        bound = min(len(text), budget * self.max_token_bytes)
        size = min(bound, self.first_size(budget))
        while True:
            tokens = self._encode(text[:size])
            if len(tokens) > budget or size >= bound:
                break
            size = min(bound, 2 * size)
        keep = min(budget, len(tokens))
        for _ in range(_SHORTEN_ATTEMPTS):
            chars = _whole_characters(self._encoding.decode_bytes(tokens[:keep]))
            counted = self.count(text[:chars])
            if counted <= budget:
                return chars, counted
            keep = max(0, keep - (counted - budget))
        return self._halving_prefix(text[:size], budget)

    def _halving_prefix(self, text: str, budget: int) -> tuple[int, int]:
        chars = len(text) // 2
        while chars > 0:
            counted = self.count(text[:chars])
            if counted <= budget:
                return chars, counted
            chars //= 2
        return 0, 0

    def _encode(self, text: str) -> list[int]:
        try:
            tokens: list[int] = self._encoding.encode_ordinary(text)
        except UnicodeEncodeError as exc:  # lone surrogates: cut what tiktoken would count
            raise InexactCount("a text holds lone surrogates") from exc
        return tokens


def _whole_characters(data: bytes) -> int:
    """How many characters the longest whole-UTF-8 prefix of `data` holds."""
    try:
        return len(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return len(data[: exc.start].decode("utf-8", "replace"))
