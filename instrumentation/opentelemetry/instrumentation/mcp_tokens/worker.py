"""The instrumented process's side of the analysis: a bounded queue and one thread.

`submit()` runs on the caller's path: it never blocks and never raises. It appends the
finished exchange to a queue bounded by count (`QUEUE_SIZE`) and by the characters its
payloads hold (`Pacing.queue_chars`, queued and in analysis together); past either bound
the exchange goes to `on_skip` (`overload`): under overload we drop analyses rather than
slow the application down or grow memory. The first exchange starts the thread
(`mcp-tokens-analysis`), and the thread starts the analysis: a helper process
(helper_link.py) or, where none can run, the analysis on this thread (thread_link.py).

The heavy work is the helper's; what is left here (encoding payloads for it, recording the
findings on spans and metrics) still needs the GIL, and every time the worker takes it
while a call runs, the call waits. So the worker keeps out of the way (knobs: pacing.py):
- it sleeps while there is nothing to do, woken by the first exchange after a quiet spell;
- it works in rounds (`round_s` apart, `round_budget_s` of CPU each), and only once no MCP
  operation of the process is in flight and the last response path is likely over
  (inflight.py), stopping between two steps when a call starts: a burst of calls is
  handled after it. It waits so for up to `max_lag_s` after the oldest response in hand,
  and not at all once its queue is half full;
- under sustained load (calls in flight and nothing left to wait) its rounds use at most
  `busy_round_budget_s`, `busy_round_s` apart and `busy_ratio` times the CPU the last one
  used, and it hands the GIL over every `slice_s` (gil.py);
- a payload of many values, which holds the GIL while it is freed, is freed in a round
  without calls in flight;
- findings that do not come back within `answer_within_s` are given up (`overload`);
- if the helper exits, what it held is counted as failed (`analysis_error`) and a new one
  starts after a pause that doubles with each failure; a helper that cannot start, or
  dies before it is ready, is replaced by the analysis on this thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import semconv
from .config import ANALYSIS_PROCESS, ANALYSIS_THREAD, Settings
from .engine.blocks import payload_chars
from .exchange import Exchange
from .gil import needs_slicing, yield_gil
from .inflight import IN_FLIGHT
from .link import Link, LinkClosed
from .pacing import PACING, Pacing

if TYPE_CHECKING:
    from .analyst import AnalystStatus, Findings

_logger = logging.getLogger(__name__)

LinkFactory = Callable[[Settings, Pacing, str], Link]


def open_link(settings: Settings, pacing: Pacing, mode: str) -> Link:
    """Start the analysis: on the worker's thread, at the first exchange. Its modules (the
    channel, the analyst, the engine and the tokenizer) are imported here, so that a
    process that never sees an MCP message never loads them."""
    if mode == ANALYSIS_PROCESS:
        from .helper_link import ProcessLink  # noqa: PLC0415 -- the analysis loads at the first exchange

        return ProcessLink(settings, pacing)
    from .thread_link import ThreadLink  # noqa: PLC0415 -- the analysis loads at the first exchange

    return ThreadLink(settings, pacing)


@dataclass
class _Sent:
    """An exchange handed to the analysis, until its findings come back."""

    exchange: Exchange
    weight: int
    steps: Iterator[bool]  # its sending, a step at a time
    many_values: bool  # its payloads are freed in a quiet round (`_let_go`)
    sent_at: float = 0.0  # time.monotonic() once completely sent
    send_s: float = 0.0  # CPU time spent encoding and sending it


class AnalysisWorker:
    def __init__(
        self,
        settings: Settings,
        on_findings: Callable[[Exchange, Findings, float], None],
        on_skip: Callable[[Exchange, str], None],
        *,
        pacing: Pacing = PACING,
        link_factory: LinkFactory = open_link,
    ) -> None:
        self._settings = settings
        self._pacing = pacing
        self._on_findings = on_findings
        self._on_skip = on_skip
        self._link_factory = link_factory
        self._mode = settings.analysis
        self._stopping = False
        self._reset_state()
        _WORKERS.add(self)

    def _reset_state(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[tuple[Exchange, int]] = deque()
        self._sent: OrderedDict[int, _Sent] = OrderedDict()
        self._sending: _Sent | None = None
        self._arrived: deque[Findings] = deque()
        # Payloads of many values left to free: (time.monotonic() when kept, request, response).
        self._kept: deque[tuple[float, object, object]] = deque()
        self._pending_chars = 0
        self._next_seq = 0
        self._idle = True
        self._in_round = False
        self._sustained_round = False
        self._thread: threading.Thread | None = None
        self._link: Link | None = None
        self._link_full = False
        self._failures = 0
        self._retry_at = 0.0
        self._ready = threading.Event()
        self.status: AnalystStatus | None = None

    # --- the caller's side ----------------------------------------------------------------
    def submit(self, exchange: Exchange) -> None:
        handled = False  # queued, or handed to on_skip: exactly one of the two, once
        try:
            IN_FLIGHT.discard(exchange)  # over, even if a path never called finish()
            weight = payload_chars(exchange.request) + payload_chars(exchange.response)
            IN_FLIGHT.settling(self._pacing.settle_seconds(weight, exchange.response_crosses_transport))
            with self._condition:
                accepted = (
                    not self._stopping
                    and len(self._queue) + len(self._sent) < self._settings.queue_size
                    and self._pending_chars + weight <= self._pacing.queue_chars
                )
                if accepted:
                    self._wake()  # raises where no thread can start: the exchange is skipped
                    self._queue.append((exchange, weight))
                    handled = True
                    self._pending_chars += weight
            if not accepted:
                handled = True
                self._on_skip(exchange, semconv.SKIP_OVERLOAD)
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
            if not handled:
                self._skip_quietly(exchange, semconv.SKIP_OVERLOAD)

    def _wake(self) -> None:
        """Start the thread on the first exchange (in a forked child too), or wake it."""
        if self._thread is None:
            thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
            thread.start()
            self._thread = thread
        elif self._idle:
            self._condition.notify()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start the analysis if no exchange has, and wait until its tokenizer is loaded
        (tests and benchmarks); whether it is."""
        with self._condition:
            if not self._stopping:
                self._wake()
        return self._ready.wait(timeout)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted exchange has been recorded or skipped; False when
        `timeout` (seconds) passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._has_work():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(0.05 if remaining is None else min(remaining, 0.05))
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        """Record what is in hand (up to `timeout` seconds), then stop: leftovers are skipped
        (`shutdown`), the analysis is closed. Later exchanges are skipped."""
        self.force_flush(timeout)
        with self._condition:
            self._stopping = True
            leftovers = [exchange for exchange, _ in self._queue]
            self._queue.clear()
            self._condition.notify_all()
            thread = self._thread
        for exchange in leftovers:
            self._skip_quietly(exchange, semconv.SKIP_SHUTDOWN)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def mode(self) -> str:
        """Where the analysis runs: in a helper process, or on a thread."""
        return self._mode

    # --- the worker thread ----------------------------------------------------------------
    def _has_work(self) -> bool:
        # A round may hold an exchange taken from the queue or the sent ones and not
        # recorded yet (its span not ended): force_flush() waits for the round too.
        pending = self._queue or self._sent or self._sending or self._arrived or self._kept
        return bool(self._in_round or pending)

    def _run(self) -> None:
        used = 0.0
        try:
            while self._next_round():
                self._pause_before_round(used)
                started = time.thread_time()
                with self._condition:
                    self._in_round = True
                try:
                    self._round(started)
                except Exception:
                    _logger.debug("mcp-tokens analysis round failed", exc_info=True)
                finally:
                    with self._condition:
                        self._in_round = False
                        self._condition.notify_all()
                used = time.thread_time() - started
        finally:
            self._give_up(semconv.SKIP_SHUTDOWN)
            # On this thread: a helper is told of its parent's death through the thread
            # that started it (helper.py), so that thread closes it.
            self._close_link()

    def _next_round(self) -> bool:
        """Sleep while there is nothing to do; False once stopping. Until the analysis is
        ready, rounds go on: its first message is read in one."""
        with self._condition:
            while not self._stopping and not self._has_work() and self._ready.is_set():
                self._idle = True
                self._condition.notify_all()  # force_flush() waiters
                self._condition.wait()
            self._idle = False
            return not self._stopping

    def _pause_before_round(self, used: float) -> None:
        pacing = self._pacing
        spacing = pacing.busy_round_s if self._sustained() else pacing.round_s
        time.sleep(max(spacing, pacing.busy_ratio * used))
        link = self._link
        if link is None:  # waiting to start (or restart) the analysis
            time.sleep(max(0.0, min(self._retry_at - time.monotonic(), 1.0)))
            return
        if self._link_full or not (self._queue or self._sending or self._arrived):
            # Only answers to wait for (or a full pipe, which the helper empties before it
            # answers): wake when they come, not every round.
            link.wait(pacing.await_s)
        deferral = self._deferral_s()
        if deferral > 0:
            IN_FLIGHT.wait_until_quiet(deferral)

    def _deferral_s(self) -> float:
        """How much longer the work in hand may wait for calls in flight: until `max_lag_s`
        after the oldest pending response, and not at all with the queue half full
        (waiting would fill it). 0 or less: work alongside the calls."""
        with self._condition:
            if 2 * (len(self._queue) + len(self._sent)) >= self._settings.queue_size:
                return 0.0
            oldest = self._queue[0][0].end_ns if self._queue else 0
            if self._sent:
                first = next(iter(self._sent.values())).exchange.end_ns
                oldest = min(oldest, first) if oldest else first
        if not oldest:
            return self._pacing.max_lag_s
        return self._pacing.max_lag_s - (time.time_ns() - oldest) / 1e9

    def _sustained(self) -> bool:
        """Calls are in flight and the work in hand may not wait for them any longer. A
        backlog with no call in flight is handled at the quiet pace."""
        return self._deferral_s() <= 0 and IN_FLIGHT.busy()

    def _round(self, started: float) -> None:
        link = self._current_link()
        if link is None:
            return
        self._sustained_round = self._sustained()
        try:
            self._arrived.extend(link.receive())
            self._note_status(link)
            self._handle_arrived(started)
            self._link_full = not (self._send(link, started) and link.flush())
            self._release_kept(started)
        except LinkClosed as exc:
            self._lose_link(link, str(exc))
        # Findings that do not come back (a helper starved of CPU, or stuck) are given up.
        self._give_up(semconv.SKIP_OVERLOAD, sent_before=time.monotonic() - self._pacing.answer_within_s)

    def _may_go_on(self, started: float) -> bool:
        """Within the round's CPU budget and, while the work may still wait, no call started."""
        spent = time.thread_time() - started
        if self._sustained_round:
            if spent >= self._pacing.busy_round_budget_s:
                return False
            yield_gil(self._pacing)
            return True
        return spent < self._pacing.round_budget_s and not IN_FLIGHT.busy()

    # --- the link ---------------------------------------------------------------------------
    def _current_link(self) -> Link | None:
        if self._link is None and time.monotonic() >= self._retry_at:
            try:
                self._link = self._link_factory(self._settings, self._pacing, self._mode)
            except Exception as exc:
                self._link_failed(f"could not start ({exc})", started=False)
        return self._link

    def _note_status(self, link: Link) -> None:
        status = link.status
        if status is not None and status is not self.status:
            self.status = status
            self._failures = 0
            self._ready.set()

    def _lose_link(self, link: Link, reason: str) -> None:
        self._close_link()
        self._give_up(semconv.SKIP_ERROR)
        self._link_failed(reason, started=link.status is not None)

    def _link_failed(self, reason: str, *, started: bool) -> None:
        if not started and self._mode == ANALYSIS_PROCESS:
            _logger.warning("mcp-tokens: the analysis helper %s; analysing on a thread instead", reason)
            self._mode = ANALYSIS_THREAD
            return
        self._failures += 1
        pause = self._pacing.restart_pause(self._failures)
        self._retry_at = time.monotonic() + pause
        _logger.warning("mcp-tokens: the analysis %s; restarting it in %.0f s", reason, pause)

    def _close_link(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(Exception):
                link.close()

    # --- exchanges ------------------------------------------------------------------------
    def _handle_arrived(self, started: float) -> None:
        while self._arrived and self._may_go_on(started):
            findings = self._arrived.popleft()
            with self._condition:
                sent = self._sent.pop(findings.seq, None)
                if sent is not None:
                    self._pending_chars -= sent.weight
            if sent is not None:  # else given up already
                try:
                    self._on_findings(sent.exchange, findings, sent.send_s)
                except Exception:
                    _logger.debug("mcp-tokens could not record an analysis", exc_info=True)

    def _send(self, link: Link, started: float) -> bool:
        """Step through the queued exchanges' sending; False when the link is full."""
        while self._may_go_on(started):
            if self._sending is None:
                item = self._take_queued()
                if item is None:
                    return True
                self._sending = self._start_sending(link, *item)
            sending = self._sending
            cpu = time.thread_time()
            step = next(sending.steps, None)
            sending.send_s += time.thread_time() - cpu
            if step is False:
                return False
            if step is None:
                self._sending = None
                sending.sent_at = time.monotonic()
                self._let_go(sending)
        return True

    def _take_queued(self) -> tuple[Exchange, int] | None:
        with self._condition:
            return self._queue.popleft() if self._queue else None

    def _start_sending(self, link: Link, exchange: Exchange, weight: int) -> _Sent:
        many_values = needs_slicing(exchange.request, exchange.response, self._pacing, by_chars=False)
        with self._condition:
            seq = self._next_seq
            self._next_seq += 1
            behind = self._pending_chars >= self._pacing.behind_chars
            sent = self._sent[seq] = _Sent(exchange, weight, link.sender(exchange, seq, behind), many_values)
        return sent

    def _let_go(self, sent: _Sent) -> None:
        """Drop our references to the payloads (the analysis has them now). Ours may be the
        last: freeing a payload of many values holds the GIL for as long as it takes, so
        such a payload is kept for `_release_kept`."""
        exchange = sent.exchange
        if sent.many_values and len(self._kept) < self._pacing.max_kept_payloads:
            self._kept.append((time.monotonic(), exchange.request, exchange.response))
        exchange.request = exchange.response = None

    def _release_kept(self, started: float) -> None:
        """Free kept payloads while no call is in flight (within the round's budget); one a
        round once the oldest has been kept `max_keep_s` (sustained load has no quiet round)."""
        kept = self._kept
        while kept:
            if time.monotonic() - kept[0][0] >= self._pacing.max_keep_s:
                kept.popleft()
                return
            if time.thread_time() - started >= self._pacing.round_budget_s or IN_FLIGHT.busy():
                return
            kept.popleft()

    def _give_up(self, reason: str, sent_before: float | None = None) -> None:
        """Skip what the analysis holds and will not answer for: all of it, or only what was
        completely sent before `sent_before` (a `time.monotonic()`)."""
        given_up: list[_Sent] = []
        with self._condition:
            while self._sent:
                seq, sent = next(iter(self._sent.items()))
                if sent_before is not None and not 0 < sent.sent_at < sent_before:
                    break
                del self._sent[seq]
                self._pending_chars -= sent.weight
                given_up.append(sent)
            if sent_before is None:
                self._sending = None
                self._arrived.clear()
            self._condition.notify_all()
        for sent in given_up:
            self._skip_quietly(sent.exchange, reason)

    def _skip_quietly(self, exchange: Exchange, reason: str) -> None:
        try:
            self._on_skip(exchange, reason)
        except Exception:
            _logger.debug("mcp-tokens could not skip an exchange", exc_info=True)

    # --- fork -------------------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """The worker thread and the helper belong to the parent; what the parent had queued
        is the parent's to record. The child starts its own on its first exchange."""
        if self._link is not None:
            with contextlib.suppress(Exception):
                self._link.forget()
        self._reset_state()


_WORKERS: weakref.WeakSet[AnalysisWorker] = weakref.WeakSet()


def _reset_workers_in_child() -> None:
    for worker in list(_WORKERS):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_in_child)
