"""The bounded background worker that takes token analysis off the response path.

`submit()` never blocks and never raises: it appends to a bounded deque and wakes the
worker thread. When the queue is full (by count, or by the characters its payloads hold)
the exchange is handed to `on_overflow` instead, which records it as skipped: under
overload we drop analyses rather than slow the application down or grow memory.

The worker shares the interpreter with the application, so it stays out of its way:
- it runs at a lower OS scheduling priority (Linux nice +19 for this thread and the
  counting threads it starts), so the application's threads get the CPU first and the
  analysis uses what is left;
- between exchanges (and the pipeline between the steps of one, `yield_gil`, and within
  the steps of a heavy one, `sliced`) it sleeps briefly: CPython hands the GIL to a
  thread that waits for it only after the holder blocks or after the switch interval
  (5 ms), so without these pauses an event loop that wakes up while the worker runs
  Python could wait milliseconds;
- it waits while an MCP operation of this process is in flight, and until the response
  path of the last one is likely over (`exchange.IN_FLIGHT`): before it starts an
  exchange and at every pause, so a call running next to the analysis does not lose the
  GIL at each of its pipe reads and socket writes, nor share the CPU and caches with the
  tokenizer. The pipeline counts in short chunks so that pauses come every few
  milliseconds. An exchange's analysis waits so for `MAX_LAG_S` in all, counted from its
  response (so time spent queued counts too); then, while operations are still in
  flight, it runs at a fifth of its pace (`busy_pause_s`). So a burst of calls shorter
  than that is analysed after it, and sustained load makes the telemetry lag by about
  `MAX_LAG_S` plus the analysis' own time, or fills the queue until it drops;
- with its queue half full (by count) it stops waiting, so that waiting does not fill it;
- when it falls further behind than that (an exchange waited `MAX_BACKLOG_S`, or the
  queue holds half its characters), exact counting cannot keep up: such exchanges go to
  `on_backlog`, which estimates them (a fraction of the cost) and records that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from .engine.blocks import payload_chars
from .exchange import IN_FLIGHT, Exchange, settle_seconds

_logger = logging.getLogger(__name__)

# How much lower than the application the worker thread runs (Linux nice increment).
NICE_INCREMENT = 19
# A pause long enough for a waiting thread to take the GIL (a zero sleep is not: the
# sleeper usually takes it back before the waiter is scheduled).
YIELD_S = 0.0001
# How long the worker may run Python before it pauses: what a waiting event loop loses.
SLICE_S = 0.0002
# Under sustained load (operations in flight and no more waiting for them) the worker
# pauses this many times as long as it used the CPU, at most MAX_BUSY_PAUSE_S at a time.
BUSY_PAUSE_RATIO = 4.0
MAX_BUSY_PAUSE_S = 0.005
# How long after its response completed an exchange's analysis may still wait for the
# process's MCP operations in flight; and how far behind the analysis may fall before it
# estimates instead of counting.
MAX_LAG_S = 1.0
MAX_BACKLOG_S = 5.0
# Payloads at least this large (in characters) are let go only while no call is in flight.
RELEASE_QUIETLY_CHARS = 1 << 18

_slices = threading.local()


def yield_gil() -> None:
    """Pause if this thread ran longer than `SLICE_S` since its last pause, so that a
    thread waiting for the GIL (an event loop) runs now rather than after the switch
    interval; while MCP operations are in flight, the pause lasts until they are over,
    within this thread's deferral budget (see `deferring_for`)."""
    if time.perf_counter() - getattr(_slices, "since", 0.0) >= SLICE_S:
        if not _wait_for_quiet():
            time.sleep(busy_pause_s())
        _slices.since = time.perf_counter()
        _slices.cpu_since = time.thread_time()


def busy_pause_s() -> float:
    """How long a pause lasts once waiting for quiet is over (or not allowed). With
    operations in flight (sustained load) it is `BUSY_PAUSE_RATIO` times the CPU time this
    thread used since its last pause, so the worker takes at most 1 / (1 + ratio) of a
    core and of the GIL from the calls, and its queue absorbs the rest (overflowing into
    counted drops). Otherwise just long enough to hand the GIL over."""
    if not IN_FLIGHT.busy():
        return YIELD_S
    used = time.thread_time() - getattr(_slices, "cpu_since", 0.0)
    return max(YIELD_S, min(MAX_BUSY_PAUSE_S, BUSY_PAUSE_RATIO * used))


def deferring_for(seconds: float) -> None:
    """Let this thread's pauses wait for operations in flight for `seconds` in all (each
    wait uses up part of it); 0 stops them waiting."""
    _slices.defer_budget = seconds


def _wait_for_quiet() -> bool:
    """Wait while operations are in flight, within the deferral budget; whether it waited."""
    budget: float = getattr(_slices, "defer_budget", 0.0)
    if budget <= 0:
        return False
    started = time.perf_counter()
    waited = IN_FLIGHT.wait_until_quiet(budget)
    if waited:
        _slices.defer_budget = budget - (time.perf_counter() - started)
    return waited


def _pause_hook(frame: object, event: str, arg: object) -> None:
    if event in ("call", "c_return", "return"):
        yield_gil()


@contextlib.contextmanager
def sliced() -> Iterator[None]:
    """Run the block with `yield_gil` checked at every function call and return of this
    thread (a profile hook of this thread only), so that long pure-Python stretches of
    the analysis give the GIL away every `SLICE_S`. A hook someone else set is kept."""
    if sys.getprofile() is not None:
        yield
        return
    sys.setprofile(_pause_hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def lower_thread_priority(increment: int = NICE_INCREMENT) -> bool:
    """Raise the calling thread's nice value (Linux: per thread, inherited by the threads it
    starts). A no-op where threads have no priority of their own; False when not lowered."""
    # Elsewhere the id given to setpriority() names a process, never a thread.
    if not sys.platform.startswith("linux"):
        return False
    try:
        thread_id = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread_id)
        os.setpriority(os.PRIO_PROCESS, thread_id, min(19, current + increment))
    except OSError:
        return False
    return True


class AnalysisWorker:
    def __init__(
        self,
        process: Callable[[Exchange], None],
        on_overflow: Callable[[Exchange], None],
        *,
        on_backlog: Callable[[Exchange], None] | None = None,
        max_pending: int = 1024,
        max_pending_chars: int = 256 << 20,
    ) -> None:
        self._process = process
        self._on_overflow = on_overflow
        # Without a cheaper way to take exchanges the worker is behind on, it processes them.
        self._on_backlog = on_backlog or process
        self._max_pending = max_pending
        self._max_pending_chars = max_pending_chars
        self._queue: deque[tuple[Exchange, int]] = deque()
        self._pending_chars = 0
        self._busy = False
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        with self._condition:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
            self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        handled = False  # queued, or handed to on_overflow: exactly one of the two, once
        try:
            IN_FLIGHT.discard(exchange)  # over, even if a path never called finish()
            weight = payload_chars(exchange.request) + payload_chars(exchange.response)
            IN_FLIGHT.settling(settle_seconds(weight, exchange.response_crosses_transport))
            with self._condition:
                accepted = (
                    not self._stopping
                    and len(self._queue) < self._max_pending
                    and self._pending_chars + weight <= self._max_pending_chars
                )
                if accepted:
                    self._queue.append((exchange, weight))
                    handled = True
                    self._pending_chars += weight
                    self._condition.notify()
            if not accepted:
                handled = True
                self._on_overflow(exchange)
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
            if not handled:
                self._drop(exchange)

    def _drop(self, exchange: Exchange) -> None:
        """An exchange we failed to queue still goes to `on_overflow`, which ends its span."""
        try:
            self._on_overflow(exchange)
        except Exception:
            _logger.debug("mcp-tokens could not drop an exchange", exc_info=True)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued exchange is processed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._queue or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Process what is queued (up to `timeout`), then stop; leftovers go to on_overflow."""
        self.drain(timeout)
        with self._condition:
            self._stopping = True
            leftovers = [exchange for exchange, _ in self._queue]
            self._queue.clear()
            self._pending_chars = 0
            self._condition.notify_all()
        for exchange in leftovers:
            self._on_overflow(exchange)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _lag_s(self, exchange: Exchange) -> float:
        """How long ago the exchange's response completed (0 if it has not)."""
        return max(0.0, (time.time_ns() - exchange.end_ns) / 1e9) if exchange.end_ns else 0.0

    def _is_behind(self, lag_s: float) -> bool:
        """Whether exact counting cannot keep up: an exchange waited `MAX_BACKLOG_S`, or the
        queue holds half the characters it may (the queue's count bound is the overflow's)."""
        return lag_s >= MAX_BACKLOG_S or 2 * self._pending_chars >= self._max_pending_chars

    def _run(self) -> None:
        lower_thread_priority()
        while True:
            with self._condition:
                while not self._queue and not self._stopping:
                    self._condition.wait()
                if self._stopping and not self._queue:
                    return
                exchange, weight = self._queue.popleft()
                self._busy = True
                lag_s = self._lag_s(exchange)
                behind = self._is_behind(lag_s)
                may_wait = not behind and 2 * len(self._queue) < self._max_pending
            # An exchange waits for calls in flight so long that it started MAX_LAG_S after
            # its response, at most: the waits it already made in the queue count. With the
            # queue half full it does not wait at all: waiting would fill it, and drop.
            deferring_for(MAX_LAG_S - lag_s if may_wait else 0.0)
            try:
                _wait_for_quiet()
                (self._on_backlog if behind else self._process)(exchange)
            except Exception:
                _logger.debug("mcp-tokens analysis failed", exc_info=True)
            finally:
                with self._condition:
                    self._pending_chars -= weight
                    self._busy = False
                    self._condition.notify_all()
            if weight >= RELEASE_QUIETLY_CHARS:
                # If this thread holds the last reference, dropping it frees the payload's
                # objects with the GIL held (tens of ms for a million of them): not mid-call.
                _wait_for_quiet()
            del exchange  # now, not when the next exchange arrives
            deferring_for(0.0)
            yield_gil()
