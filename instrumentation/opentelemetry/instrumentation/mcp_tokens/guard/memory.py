# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the guard remembers between results, bounded whatever peers send.

- `Deliveries`: tokens each budget scope has been delivered through the guard, so a
  result is held to what is left of the scope's context window now (the analysis' ledger
  runs in the counting service, after the response, and lags the response path).
- `Repeats`: recent calls per (scope, tool, arguments), for the repeat limit.

Both are LRU maps with at most `max_entries` keys, keyed by `engine.ledger.scope_key`
(long peer-chosen ids become a prefix plus a digest), and drop what has been idle.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from opentelemetry.instrumentation.mcp_tokens.engine.ledger import scope_key

# A repeat is the same tool with the same arguments: arguments are compared by the digest
# of their compact JSON (up to this many characters; longer ones by their length and ends).
_DIGEST_CHARS = 1 << 20


class Deliveries:
    """Tokens delivered per budget scope (LRU, idle scopes forgotten)."""

    def __init__(self, max_entries: int, idle_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._max = max(1, max_entries)
        self._idle_s = idle_s
        self._clock = clock
        self._used: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()

    def used(self, scope: str) -> int:
        key = scope_key(scope)
        with self._lock:
            entry = self._used.get(key)
            if entry is None or self._clock() - entry[1] > self._idle_s:
                return 0
            return entry[0]

    def add(self, scope: str, tokens: int) -> int:
        key = scope_key(scope)
        now = self._clock()
        with self._lock:
            used, seen = self._used.pop(key, (0, now))
            if now - seen > self._idle_s:
                used = 0
            used += max(0, tokens)
            self._used[key] = (used, now)
            while len(self._used) > self._max:
                self._used.popitem(last=False)
            return used


class Repeats:
    """Calls per (scope, tool, arguments) within a sliding window (LRU)."""

    def __init__(
        self, limit: int, window_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._limit = limit
        self._window_s = window_s
        self._max = max(1, max_entries)
        self._clock = clock
        self._calls: OrderedDict[bytes, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def record(self, scope: str, tool: str, arguments_json: str) -> int:
        """Count one call; how many calls of the same key fell within the window (this one
        included, at most limit + 1: that is all deciding needs)."""
        key = _digest(scope_key(scope), tool, arguments_json)
        now = self._clock()
        with self._lock:
            calls = self._calls.pop(key, None) or deque(maxlen=self._limit + 1)
            while calls and now - calls[0] > self._window_s:
                calls.popleft()
            calls.append(now)
            self._calls[key] = calls
            while len(self._calls) > self._max:
                self._calls.popitem(last=False)
            return len(calls)


def _digest(scope: str, tool: str, arguments_json: str) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for part in (scope, tool):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    if len(arguments_json) > _DIGEST_CHARS:
        half = _DIGEST_CHARS // 2
        arguments_json = f"{len(arguments_json)}:{arguments_json[:half]}{arguments_json[-half:]}"
    digest.update(arguments_json.encode("utf-8", "surrogatepass"))
    return digest.digest()
