# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A bounded, thread-safe LRU of token counts for strings that recur.

Tool definitions, system texts and boilerplate blocks come back on every call; counting
them again costs microseconds to milliseconds, a lookup costs a hash (cached inside the
str object after the first time) and a lock. The cache is bounded twice: by entries and
by the characters of the strings it keeps alive, so a flood of distinct strings cannot
grow it past `max_chars` characters.
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
    chars: int
    max_entries: int
    max_chars: int


class CountCache(Generic[V]):
    """LRU from a string to a value, bounded by entry count and total characters."""

    def __init__(self, max_entries: int, max_chars: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        if max_chars < 0:
            raise ValueError(f"max_chars must be >= 0, got {max_chars}")
        self._max_entries = max_entries
        self._max_chars = max_chars
        self._entries: OrderedDict[str, V] = OrderedDict()
        self._chars = 0
        self._hits = 0
        self._misses = 0
        self._lock = threading.Lock()
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._lookup = self._entries.get
        self._move_to_end = self._entries.move_to_end

    @property
    def enabled(self) -> bool:
        return self._max_entries > 0 and self._max_chars > 0

    def get(self, text: str) -> V | None:
        # The hit path is the reason for this class: bound methods and acquire/release
        # instead of `with` save about a third of it.
        self._acquire()
        try:
            value = self._lookup(text)
            if value is None:
                self._misses += 1
            else:
                self._move_to_end(text)
                self._hits += 1
            return value
        finally:
            self._release()

    def put(self, text: str, value: V) -> None:
        size = len(text)
        if size > self._max_chars or self._max_entries == 0:
            return
        with self._lock:
            if text in self._entries:
                self._entries.move_to_end(text)
                return
            self._entries[text] = value
            self._chars += size
            while len(self._entries) > self._max_entries or self._chars > self._max_chars:
                evicted, _ = self._entries.popitem(last=False)
                self._chars -= len(evicted)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(
                hits=self._hits,
                misses=self._misses,
                entries=len(self._entries),
                chars=self._chars,
                max_entries=self._max_entries,
                max_chars=self._max_chars,
            )

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0
