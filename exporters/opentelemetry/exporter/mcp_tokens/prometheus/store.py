# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A worker's file of sample values, and reading any worker's file.

The file is prometheus_client's `MmapedDict`: one writer (the worker's flush thread), readers
in other processes at any time. Each entry is a key, a value and a timestamp; an entry is
appended whole before the header's used-length grows past it, and a value is overwritten in
place in one 16-byte copy, so a reader sees every sample either as it was or as it is.
Values are cumulative (the worker's totals since it started, or since it was forked), so a
reader never needs more than the latest file. One extra entry, `FLUSHED`, holds the scrape
generation of the latest flush, which is how the root knows that a polling worker has answered
(notified workers answer on their sockets, notify.py); it is the file's first entry, at a
fixed place, so that waiting for an answer reads a few bytes.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import mmap_dict

from .merge import Stamped
from .samples import SampleKey

_logger = logging.getLogger(__name__)

FLUSHED = "#flushed"
# mmap_dict's layout: an 8-byte header, then per entry a 4-byte key length, the key padded so
# that the two doubles (value, timestamp) that follow are 8-byte aligned.
_FLUSHED_KEY = FLUSHED.encode()
_FLUSHED_VALUE_AT = 8 + 4 + len(_FLUSHED_KEY) + (8 - (len(_FLUSHED_KEY) + 4) % 8)
_FLUSHED_ENTRY = struct.Struct(f"<i{len(_FLUSHED_KEY)}s")
_DOUBLE = struct.Struct("<d")
# prometheus_client's mmap_dict module has no annotations.
_MmapedDict: Any = mmap_dict.MmapedDict


class WorkerStore:
    """The calling process's own file. Not thread safe: one flush thread writes it."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self._file = _MmapedDict(str(path))
        self._file.write_value(FLUSHED, -1.0, 0.0)  # the first entry: see read_generation
        self._written: dict[SampleKey, Stamped] = {}

    def write(self, values: Mapping[SampleKey, Stamped], generation: int) -> None:
        for key, stamped in values.items():
            if self._written.get(key) != stamped:
                self._file.write_value(key.encode(), stamped[0], stamped[1])
                self._written[key] = stamped
        self._file.write_value(FLUSHED, float(generation), 0.0)

    def close(self) -> None:
        """Close the file and let go of its lock: from then on the root may fold it. In a forked
        child this closes only the child's copies (the parent keeps its file and lock)."""
        self._file.close()
        os.close(self._lock_fd)


def read_generation(path: Path) -> int:
    """The scrape generation a worker's file was last flushed at (-1: never, or unreadable)."""
    try:
        with path.open("rb") as file:
            head = file.read(_FLUSHED_VALUE_AT + 8)
    except OSError:
        return -1
    if len(head) < _FLUSHED_VALUE_AT + 8 or _FLUSHED_ENTRY.unpack_from(head, 8) != (
        len(_FLUSHED_KEY),
        _FLUSHED_KEY,
    ):
        return -1
    return int(_DOUBLE.unpack_from(head, _FLUSHED_VALUE_AT)[0])


class KeyCache:
    """Decoded sample keys by their text: every scrape reads the same keys from every worker's
    file, and parsing their JSON each time would be most of the scrape's cost. Bounded: past
    `max_keys` it starts over."""

    def __init__(self, max_keys: int = 200_000) -> None:
        self._max_keys = max_keys
        self._keys: dict[str, SampleKey] = {}

    def decode(self, text: str) -> SampleKey:
        key = self._keys.get(text)
        if key is None:
            key = SampleKey.decode(text)
            if len(self._keys) >= self._max_keys:
                self._keys.clear()
            self._keys[text] = key
        return key


def read_worker_file(path: Path, keys: KeyCache | None = None) -> tuple[dict[SampleKey, Stamped], int]:
    """The samples in a worker's file and the generation it last flushed at (-1: never)."""
    decode = keys.decode if keys is not None else SampleKey.decode
    values: dict[SampleKey, Stamped] = {}
    generation = -1
    for key, value, stamp, _ in _MmapedDict.read_all_values_from_file(str(path)):
        if key == FLUSHED:
            generation = int(value)
            continue
        try:
            values[decode(key)] = (value, stamp)
        except (ValueError, TypeError):
            _logger.debug("skipping an unreadable key in %s", path)
    return values, generation
