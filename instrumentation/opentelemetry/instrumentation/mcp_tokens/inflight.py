"""The MCP operations of this process that started and have not finished yet.

The analysis waits while there are any (worker.py, and the helper through the activity
board, activity.py): an operation in flight is an event loop, and often a transport
thread, that may need the GIL or a core at any moment, and every time the analysis takes
them the call waits. An `Exchange` registers itself when created for an operation that is
starting and leaves at `finish()` (or when submitted); patches never call this. A finished
operation's response path goes on for a while (the server writes the response, the client
validates it): the worker extends the quiet time by the response's size
(`Pacing.settle_seconds`). One that is never finished stops counting after `stale_s`.
"""

from __future__ import annotations

import os
import time

from .activity import ActivityBoard
from .pacing import PACING, Pacing


class InFlight:
    def __init__(self, pacing: Pacing = PACING) -> None:
        self._pacing = pacing
        # id(operation) -> time.monotonic() at start, in start order.
        self._started: dict[int, float] = {}
        # Quiet only from this time.monotonic() on (the last response path settles).
        self._settled_at = 0.0
        # The same two facts for the analysis helper, once one has started.
        self._board: ActivityBoard | None = None

    def add(self, operation: object) -> None:
        if len(self._started) < self._pacing.max_tracked:
            self._started[id(operation)] = time.monotonic()
            self._publish()

    def discard(self, operation: object) -> None:
        if self._started.pop(id(operation), None) is not None:
            # Before the worker next looks: its submit() extends this by the payload's size.
            self.settling(self._pacing.settle_s)

    def settling(self, seconds: float) -> None:
        """A response just completed; its path is likely over in `seconds`."""
        self._settled_at = max(self._settled_at, time.monotonic() + seconds)
        self._publish()

    def busy(self) -> bool:
        """Whether an operation is in flight (and not stale) or the last one's response
        path is likely still on."""
        if self._started and self._forget_stale():
            return True
        return self._settled_at > time.monotonic()

    def wait_until_quiet(self, timeout: float) -> None:
        """Wait (without the GIL) until no operation is in flight and the last response path
        is likely over, at most `timeout` seconds. An operation that starts while the last
        one settles (the next call of a burst) is waited for too, so the wait ends in a quiet
        moment, not between two calls. Operations are looked at every `poll_s` rather than
        waking the worker at each one's end: that wake-up would ask for the GIL on the
        call's own response path."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            if self._started and self._forget_stale():
                time.sleep(min(remaining, self._pacing.poll_s))
                continue
            settling = min(self._settled_at, deadline) - time.monotonic()
            if settling <= 0:
                return
            time.sleep(settling)

    def board_fd(self) -> int | None:
        """The descriptor of this process's activity board, for a helper to inherit
        (created on first use; None where there is none)."""
        if self._board is None:
            self._board = ActivityBoard.create()
            self._publish()
        return None if self._board is None else self._board.fileno()

    def _publish(self) -> None:
        board = self._board
        if board is not None:
            try:  # runs on every operation's start and end: never into the caller
                board.publish(len(self._started), self._settled_at)
            except Exception:
                self._board = None

    def _forget_stale(self) -> bool:
        """Drop operations older than `stale_s`; whether any is still in flight."""
        cutoff = time.monotonic() - self._pacing.stale_s
        try:
            # Kept in start order: unless the oldest is stale none is, and the worker (which
            # asks at every look) need not scan them all.
            oldest = next(iter(self._started.values()), None)
            if oldest is not None and oldest >= cutoff:
                return True
            stale = [key for key, started in self._started.items() if started < cutoff]
        except RuntimeError:  # changed by another thread while iterating: look next time
            return True
        for key in stale:
            self._started.pop(key, None)
        if stale:
            self._publish()
        return bool(self._started)

    def _after_fork_in_child(self) -> None:
        # The board's mapping is shared with the parent: the child's helper gets a board of
        # its own, and the child lets go of its copies of the parent's.
        board, self._board = self._board, None
        if board is not None:
            board.close()


IN_FLIGHT = InFlight()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=IN_FLIGHT._after_fork_in_child)
