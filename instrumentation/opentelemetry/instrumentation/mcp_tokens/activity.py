"""The activity board: whether this process's MCP operations are running, for its helper.

The analysis helper (helper.py) runs at the lowest priority, but on a machine with few
cores lowest is not nothing: a waking thread of the application may wait for the helper's
time slice to end, and that wait lands on a call. So the helper stops between two pieces
of work while the application has an operation in flight, as the worker thread does.

The board is two doubles in a shared memory file (Linux `memfd_create`) that the
application writes (inflight.py) and its helper reads: how many operations are in flight,
and the `time.monotonic()` (the same clock in every process) from which the last response
path is likely over. A write is two stores into mapped memory, no system call, cheap
enough for every operation's start and end. A torn read makes one pause end a little early
or late, nothing more.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time

from .cpu import SpareCpu
from .pacing import PACING, Pacing

_SIZE = 16  # two doubles: in flight, quiet from


class ActivityBoard:
    def __init__(self, fd: int, *, writable: bool) -> None:
        self._fd = fd
        self._map = mmap.mmap(fd, _SIZE, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
        self._slots = memoryview(self._map).cast("d")

    @classmethod
    def create(cls) -> ActivityBoard | None:
        """A new board, or None where shared memory files are not available (not Linux)."""
        memfd_create = getattr(os, "memfd_create", None)
        if memfd_create is None:
            return None
        try:
            fd = memfd_create("mcp-tokens-activity", getattr(os, "MFD_CLOEXEC", 0))
        except OSError:
            return None
        try:
            os.ftruncate(fd, _SIZE)
            return cls(fd, writable=True)
        except (OSError, ValueError):
            os.close(fd)
            return None

    @classmethod
    def open(cls, fd: int) -> ActivityBoard | None:
        """The helper's read-only view of the board whose descriptor it inherited."""
        try:
            return cls(fd, writable=False)
        except (OSError, ValueError):
            return None

    def fileno(self) -> int:
        return self._fd

    def publish(self, in_flight: int, quiet_from: float) -> None:
        self._slots[0] = in_flight
        self._slots[1] = quiet_from

    def busy(self) -> bool:
        slots = self._slots
        return slots[0] > 0 or slots[1] > time.monotonic()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._slots.release()
            self._map.close()
        with contextlib.suppress(OSError):
            os.close(self._fd)


class QuietWaiter:
    """The helper's pause between two pieces of work: while the board says the application
    is busy, sleep in `helper_poll_s` steps, until the job in hand is `helper_max_wait_s`
    past its response (as the worker waits); past that, work beside the calls if the
    machine has idle CPU for it (cpu.py), else wait on for a quiet moment."""

    def __init__(
        self, board: ActivityBoard | None, pacing: Pacing = PACING, spare: SpareCpu | None = None
    ) -> None:
        self._board = board
        self._pacing = pacing
        self._spare = spare or SpareCpu(pacing)
        self._not_after = 0.0

    def begin(self, response_end_s: float) -> None:
        """A new job, whose response completed at `response_end_s` (a `time.time()`)."""
        self._not_after = response_end_s + self._pacing.helper_max_wait_s

    def wait(self) -> None:
        board = self._board
        while board is not None and board.busy():
            if time.time() >= self._not_after and self._spare.for_helper():
                return
            time.sleep(self._pacing.helper_poll_s)
