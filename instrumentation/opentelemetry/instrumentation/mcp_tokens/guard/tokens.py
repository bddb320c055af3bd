# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact counts and cuts for the guard, as bounded as they can be.

The analysis counts after the response; the guard must decide on the response path. It
asks the user's counting service (counting/guard_server.py, which answers at normal
priority) or, where no service can run, a tokenizer of this process; either is made ready
on a daemon thread when the patches are installed with a guard on. It counts only what
deciding and cutting need:

- a text whose UTF-8 size is at most the budget fits (every token is at least one byte),
  without asking anyone;
- a text longer than the budget times the encoding's longest token (in bytes; 128 for
  o200k_base and cl100k_base) cannot fit, likewise;
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
from collections.abc import Callable
from typing import Any, Protocol

from opentelemetry.instrumentation.mcp_tokens.engine.chunking import next_cut
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TiktokenTokenizer,
    TokenCounter,
    Tokenizer,
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


class Measuring(Protocol):
    """What the guard needs of a tokenizer: `Measure` here, or the counting service's."""

    name: str
    max_token_bytes: int

    def count(self, text: str) -> int: ...

    def count_upto(self, text: str, budget: int) -> int | None: ...

    def prefix(self, text: str, budget: int) -> tuple[int, int]: ...


class GuardTokenizer:
    """The guard's measure, made ready on a daemon thread and waited for a bounded time: the
    counting service's (`remote`, which raises when no service can run), else a `Measure`
    of this process's own tokenizer."""

    def __init__(
        self,
        spec: TokenizerSpec,
        *,
        max_bytes: int,
        wait_s: float,
        remote: Callable[[], Measuring] | None = None,
    ) -> None:
        self._spec = spec
        self._max_bytes = max_bytes
        self._wait_s = wait_s
        self._remote = remote
        self._measure: Measuring | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._prepare, name="mcp-tokens-guard-tokens", daemon=True
                )
                self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the measure is ready (tests, benchmarks); whether it is."""
        self.start()
        return self._ready.wait(timeout)

    def measure(self) -> Measuring:
        """The ready measure; raises TokenizerUnavailable when none is (or will be)."""
        self.start()
        if not self._ready.wait(self._wait_s) or self._measure is None:
            raise TokenizerUnavailable("the guard's tokenizer is not ready")
        return self._measure

    def _prepare(self) -> None:
        try:
            if self._remote is not None:
                try:
                    self._measure = self._remote()
                    return
                except TokenizerUnavailable as exc:  # the service runs, but cannot cut with it
                    _logger.warning("mcp-tokens: results are delivered unguarded (%s)", exc)
                    return
                except Exception as exc:
                    _logger.warning("mcp-tokens: the guard counts in this process (%s)", exc)
            loader = TokenizerLoader(self._spec)
            loader.run()
            self._measure = measure_of(loader.tokenizer(), self._max_bytes)
        finally:
            self._ready.set()


def measure_of(tokenizer: Tokenizer, max_bytes: int) -> Measure | None:
    """A `Measure` over `tokenizer`, or None (logged) when the guard cannot cut with it."""
    if not isinstance(tokenizer, TiktokenTokenizer):
        _logger.warning(
            "mcp-tokens: the guard needs a tiktoken tokenizer (bundled or a BPE file), not %s; "
            "results are delivered unguarded",
            tokenizer.name,
        )
        return None
    counter = TokenCounter(tokenizer, max_bytes=max_bytes, threads=1, cache_entries=256)
    return Measure(counter, tokenizer.encoding, tokenizer.max_token_bytes)


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
