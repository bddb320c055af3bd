"""Exact counts and cuts for the guard, in the application's process, as bounded as they can be.

The analysis counts in its helper process, after the response; the guard must decide on
the response path, so it keeps a tokenizer of its own (`TokenizerLoader`, started on a
daemon thread when the patches are installed with a guard on) and counts only what deciding and
cutting need. `Measure` works with any `CuttingTokenizer` (engine/tokenizer.py): tiktoken
encodings and Claude's.

With a tiktoken encoding every token is at least one byte and at most its longest token
(128 bytes for o200k_base and cl100k_base), so:

- a text whose UTF-8 size is at most the budget fits;
- a text longer than the budget times the longest token cannot fit;
- otherwise the text is counted in growing prefixes that end at exact cut points
  (engine/chunking.py: the count of a prefix ending there is a lower bound of the whole
  text's), stopping as soon as one exceeds the budget.

Claude's tokens have no such bound (its word markers cost tokens without bytes), so a
text is counted whole, after a one-pass lower bound (`min_tokens`) rules out the hopeless.

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

from opentelemetry.instrumentation.mcp_tokens.engine.chunking import next_cut
from opentelemetry.instrumentation.mcp_tokens.engine.claude_names import is_claude, max_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    CuttingTokenizer,
    TokenCounter,
    TokenizerLoader,
    TokenizerSpec,
    first_prefix_chars,
)

_logger = logging.getLogger(__name__)


class TokenizerUnavailable(Exception):
    """No exact tokenizer the guard can cut with is ready: results are delivered unchanged."""


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

    @property
    def size_bound(self) -> Callable[[str, int], int] | None:
        """`bound(text, limit)`: an upper bound of the tokens of `text` from its size alone,
        known before the tokenizer loads; None for the default (its UTF-8 size)."""
        spec = self._loader.spec
        if spec.path is None and is_claude(spec.encoding):
            return _claude_bound
        return None

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
            raise TokenizerUnavailable("no exact tokenizer the guard can cut with could load")
        return self._measure


def _claude_bound(text: str, limit: int) -> int:
    return max_tokens(text)


def _measure_of(loader: TokenizerLoader, max_bytes: int) -> Measure | None:
    tokenizer = loader.tokenizer()
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
