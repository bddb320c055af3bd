# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A bounded, thread-safe LRU of token counts for strings that recur.

Tool definitions, system texts and boilerplate blocks come back on every call; counting
them again costs microseconds to milliseconds, a lookup costs a hash (cached inside the
str object after the first time) and a lock.

Entries are keyed by a fingerprint of the string, its length and its `hash()`, not by the
string itself: the cache keeps no text alive, so its memory is its entry count times about
200 bytes, whatever the texts held. (A counting process that kept its recent texts would
write to, and so copy, much of the heap it shares with its siblings.) Two different
strings of one length share a fingerprint with probability 2**-64 per pair; `hash()` is
salted per process (PYTHONHASHSEED), so a peer cannot aim for a collision.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Generic, TypeVar

V = TypeVar("V")


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    entries: int
    max_entries: int


class CountCache(Generic[V]):
    """LRU from a string's fingerprint to a value, bounded by entry count."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self._max_entries = max_entries
        self._entries: OrderedDict[tuple[int, int], V] = OrderedDict()
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._lookup = self._entries.get
        self._move_to_end = self._entries.move_to_end

    @property
    def enabled(self) -> bool:
        return self._max_entries > 0

    def get(self, text: str) -> V | None:
        key = (len(text), hash(text))
        # The hit path is the reason for this class: bound methods and acquire/release
        # instead of `with` save about a third of it.
        self._acquire()
        try:
            value = self._lookup(key)
            if value is None:
                self._misses += 1
            else:
                self._move_to_end(key)
                self._hits += 1
            return value
        finally:
            self._release()

    def put(self, text: str, value: V) -> None:
        if self._max_entries == 0:
            return
        key = (len(text), hash(text))
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return
            self._entries[key] = value
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                hits=self._hits,
                misses=self._misses,
                entries=len(self._entries),
                max_entries=self._max_entries,
            )

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
