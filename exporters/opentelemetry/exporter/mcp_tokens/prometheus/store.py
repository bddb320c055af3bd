"""A worker's file of sample values, and reading any worker's file.

The file is prometheus_client's `MmapedDict`: one writer (the worker's flush thread), readers
in other processes at any time. Each entry is a key, a value and a timestamp; an entry is
appended whole before the header's used-length grows past it, and a value is overwritten in
place in one 16-byte copy, so a reader sees every sample either as it was or as it is.
Values are cumulative (the worker's totals since it started, or since it was forked), so a
reader never needs more than the latest file. One extra entry, `FLUSHED`, holds the scrape
generation of the latest flush, which is how the root knows a worker has answered.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prometheus_client import mmap_dict

from .merge import Stamped
from .samples import SampleKey

_logger = logging.getLogger(__name__)

FLUSHED = "#flushed"
# prometheus_client's mmap_dict module has no annotations.
_MmapedDict: Any = mmap_dict.MmapedDict


class WorkerStore:
    """The calling process's own file. Not thread safe: one flush thread writes it."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self._file = _MmapedDict(str(path))
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


def read_worker_file(path: Path) -> tuple[dict[SampleKey, Stamped], int]:
    """The samples in a worker's file and the generation it last flushed at (-1: never)."""
    values: dict[SampleKey, Stamped] = {}
    generation = -1
    for key, value, stamp, _ in _MmapedDict.read_all_values_from_file(str(path)):
        if key == FLUSHED:
            generation = int(value)
            continue
        try:
            values[SampleKey.decode(key)] = (value, stamp)
        except (ValueError, TypeError):
            _logger.debug("skipping an unreadable key in %s", path)
    return values, generation
