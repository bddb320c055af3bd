# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact counts and cuts for the guard, as bounded as they can be.

The analysis counts after the response; the guard must decide on the response path. It
asks the user's counting service (counting/guard_server.py, which answers at normal
priority) or, where no service can run, a tokenizer of this process; either is made ready
on a daemon thread when the patches are installed with a guard on. `Measure` works with any
exact `CuttingTokenizer` (engine/tokenizer.py): tiktoken encodings and Claude's. It counts
only what deciding and cutting need.

With a tiktoken encoding every token is at least one byte and at most its longest token
(128 bytes for o200k_base and cl100k_base), so:

- a text whose UTF-8 size is at most the budget fits, without asking anyone;
- a text longer than the budget times the longest token cannot fit, likewise;
- otherwise the text is counted in growing prefixes that end at exact cut points
  (engine/chunking.py: the count of a prefix ending there is a lower bound of the whole
  text's), stopping as soon as one exceeds the budget.

Claude's tokens have no such bound (its word markers cost tokens without bytes): a text
fits without a question only below a bound per character (`max_tokens`), and is otherwise
counted whole, after a one-pass lower bound (`min_tokens`) rules out the hopeless.

A cut is made where the tokenizer says (a token boundary of the text's own tokenization
for tiktoken; a searched prefix for Claude), at a character, and the prefix is then counted
on its own: that count, not the position, is what the delivered result is held to.

Tokenizers that cannot cut (a HuggingFace tokenizer.json) or are not exact make the guard
fail open (`no_exact_tokenizer`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from opentelemetry.instrumentation.mcp_tokens.engine.chunking import next_cut
from opentelemetry.instrumentation.mcp_tokens.engine.claude_names import is_claude, max_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    CuttingTokenizer,
    TokenCounter,
    Tokenizer,
    TokenizerLoader,
    TokenizerSpec,
    first_prefix_chars,
)

_logger = logging.getLogger(__name__)


class TokenizerUnavailable(Exception):
    """No exact tokenizer the guard can cut with is ready: results are delivered unchanged."""


class InexactCount(Exception):
    """The counter fell back to an estimate for a text: the guard cannot hold a limit."""


class Measuring(Protocol):
    """What the guard needs of a tokenizer: `Measure` here, or the counting service's."""

    name: str
    # Every token spans at most this many UTF-8 bytes; None where no such bound holds.
    max_token_bytes: int | None

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

    @property
    def size_bound(self) -> Callable[[str, int], int] | None:
        """`bound(text, limit)`: an upper bound of the tokens of `text` from its size alone,
        known before anything is ready; None for the default (its UTF-8 size)."""
        if self._spec.path is None and is_claude(self._spec.encoding):
            return _claude_bound
        return None

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


def _claude_bound(text: str, limit: int) -> int:
    return max_tokens(text)


def measure_of(tokenizer: Tokenizer, max_bytes: int) -> Measure | None:
    """A `Measure` over `tokenizer`, or None (logged) when the guard cannot cut with it."""
    if not tokenizer.exact or not isinstance(tokenizer, CuttingTokenizer):
        _logger.warning(
            "mcp-tokens: the guard needs an exact tokenizer it can cut with (a tiktoken encoding or "
            "a Claude one with ctok), not %s; results are delivered unguarded",
            tokenizer.name,
        )
        return None
    return Measure(TokenCounter(tokenizer, max_bytes=max_bytes, threads=1, cache_entries=256))


class Measure:
    """Exact counts (never estimates: those raise `InexactCount`) and cuts of texts, with
    the `CuttingTokenizer` behind `counter`."""

    def __init__(self, counter: TokenCounter) -> None:
        tokenizer = counter.tokenizer
        if not isinstance(tokenizer, CuttingTokenizer):
            raise TypeError(f"{tokenizer.name} cannot cut text (no prefix)")
        self._counter = counter
        self._tokenizer = tokenizer
        bound = tokenizer.max_token_bytes
        # None: no tokens-per-byte bound holds, so nothing is decided by size alone.
        self.max_token_bytes = max(1, bound) if bound is not None else None
        self.name = counter.name

    def count(self, text: str) -> int:
        counted = self._counter.count(text)
        if not counted.exact:
            raise InexactCount(f"a text of {len(text)} characters was estimated")
        return counted.tokens

    def count_upto(self, text: str, budget: int) -> int | None:
        """The exact tokens of `text` when at most `budget`, else None (it is over)."""
        if self.max_token_bytes is None:
            return self._count_whole_upto(text, budget)
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
        return first_prefix_chars(budget)

    def prefix(self, text: str, budget: int) -> tuple[int, int]:
        """(characters, tokens) of a prefix of `text` that ends where the tokenizer can cut
        (a token boundary of the text's tokenization for tiktoken) and counts at most
        `budget` tokens on its own."""
        if budget <= 0 or not text:
            return 0, 0
        try:
            return self._tokenizer.prefix(text, budget, self.count)
        except UnicodeEncodeError as exc:  # lone surrogates: cut what tiktoken would count
            raise InexactCount("a text holds lone surrogates") from exc

    def _count_whole_upto(self, text: str, budget: int) -> int | None:
        lower_bound = getattr(self._tokenizer, "min_tokens", None)
        if lower_bound is not None and lower_bound(text) > budget:
            return None
        tokens = self.count(text)
        return tokens if tokens <= budget else None
