"""The activity board: whether this process's MCP operations are running, for its helper.

The analysis helper (helper.py) runs on CPU the application does not need, at the lowest
priority, but on a machine with few cores lowest is not nothing: a waking thread of the
application may wait for the helper's time slice to end (several milliseconds on Linux's
EEVDF scheduler), and that wait lands on a call. So the helper stops between two pieces of
work while the application has an operation in flight, the way the worker thread does.

The board is three doubles in a shared memory file (Linux `memfd_create`) that the
application writes and its helper reads: how many operations are in flight, the
`time.monotonic()` (CLOCK_MONOTONIC, the same clock in every process) from which the last
response path is likely over, and the share of a core the helper may take beside calls in
flight (the worker's reading of the machine's idle CPU, cpu.py). A write is three stores
into mapped memory (no system call), cheap enough for every operation's start and end.
Reads and writes are not atomic together: a torn read makes one pause a little early or
late, nothing more.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time

_SLOTS = 3  # in flight, quiet from, the helper's share beside calls
_SIZE = 8 * _SLOTS


class ActivityBoard:
    def __init__(self, fd: int, *, writable: bool) -> None:
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        self._fd = fd
        self._map = mmap.mmap(fd, _SIZE, access=access)
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

    def publish(self, in_flight: int, quiet_from: float, share_alongside: float) -> None:
        slots = self._slots
        slots[0] = in_flight
        slots[1] = quiet_from
        slots[2] = share_alongside

    def alongside(self) -> bool:
        """Whether the machine has idle CPU for the helper beside calls in flight."""
        return self._slots[2] > 0

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
    """The helper's pause: while the board says the application is busy, sleep in short
    steps. Until the exchange in hand is `not_after` (`HELPER_MAX_WAIT_S` past its
    response, as the worker waits at most 1 s after a response); past it, the helper works
    alongside the calls only if the board says the machine has idle CPU for it (cpu.py)
    and the worker did not send the exchange to be held, and otherwise waits on for a
    quiet moment, looking less often: under sustained load on a machine without idle
    cores, what the helper holds waits, and what it cannot hold is dropped and counted."""

    POLL_S = 0.002
    PATIENT_POLL_S = 0.02

    def __init__(self, board: ActivityBoard | None) -> None:
        self._board = board
        self._not_after = 0.0
        self._may_go_alongside = True

    def begin(self, not_after: float, *, hold: bool = False) -> None:
        """A new exchange, not to be held past `not_after` (a `time.time()`) if the machine
        has CPU to spare; with `hold`, held for a quiet moment however long the calls go on."""
        self._not_after = not_after
        self._may_go_alongside = not hold

    def wait(self) -> None:
        board = self._board
        if board is None:
            return
        while board.busy():
            remaining = self._not_after - time.time()
            if remaining > 0:
                time.sleep(min(self.POLL_S, remaining))
            elif self._may_go_alongside and board.alongside():
                return
            else:
                time.sleep(self.PATIENT_POLL_S)
