"""The instrumented process's side of the analysis: a bounded queue and one thread.

`submit()` runs on the caller's path: it never blocks and never raises. It appends the
finished exchange to a queue bounded by count and by the characters its payloads hold
(queued and in analysis together); past the bound the exchange goes to `on_skip`
(`overload`): under overload we drop analyses rather than slow the application down or
grow memory.

The thread (`mcp-tokens-analysis`) sends the queued exchanges to the analysis (a helper
process, see helper.py) and hands the findings that come back to `on_findings`, which
records them on spans and metrics. The heavy work (tokenizing, padding detection) is the
helper's; what is left here (encoding payloads for it, about 0.03 ms per KB-sized
exchange and 0.5 ms per MB; recording, about 0.07 ms) still needs the GIL, and every
time the worker takes it while a call runs, the call waits. So the worker keeps out of
the way:
- it sleeps while there is nothing to do, and is woken by the first exchange after a
  quiet spell, not by every exchange;
- it works in rounds, `ROUND_S` apart, and only once no MCP operation of the process is
  in flight and the last response path is likely over (`exchange.IN_FLIGHT`), stopping
  between two exchanges when a call starts: a burst of calls is handled after it. It
  waits so for `MAX_LAG_S` after the oldest response in hand, and not at all with its
  queue half full;
- under sustained load (calls in flight and nothing left to wait) its rounds are
  `BUSY_ROUND_S` apart at least, and `BUSY_RATIO` times the CPU the last one used, so it
  takes at most 1 / (1 + BUSY_RATIO) of the interpreter, and the queue absorbs (then
  drops) the rest; what exceeds the helper's share of idle CPU (cpu.py) it sends to be
  held for the next quiet moment (`Job.hold`), and once the helper holds all it may (its
  pipe stays full), it drops what is queued;
- within a round it runs Python for `SLICE_S` at most before a pause that hands the GIL
  to any thread waiting for it (`yield_gil`: between two steps, between the parts of an
  exchange's record; payloads of many values are encoded under `sliced`, which pauses
  inside steps too), and for `ROUND_BUDGET_S` in all (`BUSY_ROUND_BUDGET_S` under
  sustained load);
- findings that do not come back within `OUTSTANDING_TIMEOUT_S` are given up
  (`overload`: a helper starved of CPU);
- if the helper exits, the exchanges it held are counted as failed (`analysis_error`)
  and a new helper starts after a pause that doubles with each failure; a helper that
  cannot start at all is replaced by the analysis on a thread of this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from . import semconv
from .analyst import ANSWER_WITHIN_S, AnalystStatus, Findings, Job
from .config import ANALYSIS_PROCESS, ANALYSIS_THREAD, Settings
from .cpu import HELPER_BANK_S, HELPER_SHARE, CpuShare, HelperCost, SpareCpu, helper_share
from .engine.blocks import payload_chars, payload_weight
from .exchange import IN_FLIGHT, Exchange, settle_seconds
from .helper import Link, LinkClosed, Message, ProcessLink, ThreadLink

_logger = logging.getLogger(__name__)

# A pause long enough for a waiting thread to take the GIL (a zero sleep is not: the
# sleeper usually takes it back before the waiter is scheduled).
YIELD_S = 0.0001
# How long the worker may run Python before it pauses: what a waiting event loop loses.
SLICE_S = 0.0002
# Rounds: how far apart at least, how much CPU each may use, and how much longer than its
# CPU time the pause after a busy round lasts.
ROUND_S = 0.005
BUSY_ROUND_S = 0.02
ROUND_BUDGET_S = 0.002
BUSY_ROUND_BUDGET_S = 0.0002
BUSY_RATIO = 4.0
# How long the helper's pipe stays full under sustained load before what is queued is
# dropped: the helper then holds all it may (helper.HOLD_JOBS / HOLD_BYTES), not merely
# reading a large payload.
LINK_STUCK_S = 0.1
# With nothing to send, how long a pause waits for the analysis to answer (new exchanges
# wait at most that long to be sent).
AWAIT_S = 0.05
# How long after its response an exchange's sending and recording may still wait for the
# process's MCP calls in flight (a burst shorter than this is handled after it).
MAX_LAG_S = 1.0
# Payloads of many values kept to be freed in a quiet round, at most (memory stays bounded;
# beyond it they are freed at once), and for how long before they are freed one a round
# whether calls are in flight or not (sustained load has no quiet round).
MAX_KEPT_PAYLOADS = 8
MAX_KEEP_S = 5.0
# Findings that take longer than this to come back are given up (looked for this often).
OUTSTANDING_TIMEOUT_S = ANSWER_WITHIN_S
EXPIRY_EVERY_S = 1.0
# Pauses before a new helper after one exited: doubling from the first, up to the last.
RESTART_PAUSE_S = 1.0
MAX_RESTART_PAUSE_S = 60.0
# Exchanges this light are handled without `sliced` pauses inside a step: the profile hook
# that makes them doubles the cost of Python. Analysing is heavy by characters or by values
# (a listing of 20,000 tools holds few characters a value); encoding for the helper only by
# values, since long strings cross as they are, in bounded steps.
SLICE_FROM_CHARS = 8 << 10
SLICE_FROM_NODES = 256

LinkFactory = Callable[[Settings, str], Link]

_slices = threading.local()


def yield_gil() -> None:
    """Pause briefly if this thread ran `SLICE_S` since its last pause, so that a thread
    waiting for the GIL (an event loop) runs now rather than after the switch interval."""
    if time.perf_counter() - getattr(_slices, "since", 0.0) >= SLICE_S:
        time.sleep(YIELD_S)
        _slices.since = time.perf_counter()


def _pause_hook(frame: object, event: str, arg: object) -> None:
    if event in ("call", "c_return", "return"):
        yield_gil()


@contextlib.contextmanager
def sliced() -> Iterator[None]:
    """Run the block with `yield_gil` checked at every function call and return of this
    thread (a profile hook of this thread only), so that long pure-Python stretches give
    the GIL away every `SLICE_S`. A hook someone else set is kept."""
    if sys.getprofile() is not None:
        yield
        return
    sys.setprofile(_pause_hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def needs_slicing(request: object, response: object, *, by_chars: bool = True) -> bool:
    """Whether analysing (or, `by_chars=False`, encoding) these payloads takes long enough
    in Python to be `sliced`."""
    first, second = payload_weight(request), payload_weight(response)
    heavy_chars = by_chars and first.chars + second.chars >= SLICE_FROM_CHARS
    return heavy_chars or first.nodes + second.nodes >= SLICE_FROM_NODES


def open_link(settings: Settings, mode: str) -> Link:
    return ProcessLink(settings) if mode == ANALYSIS_PROCESS else ThreadLink(settings)


@dataclass
class _Sent:
    """An exchange handed to the analysis, until its findings come back."""

    exchange: Exchange
    weight: int
    sent_at: float = 0.0  # time.monotonic() once completely sent
    send_s: float = 0.0  # CPU time spent encoding and sending it


@dataclass
class _Sending:
    seq: int
    steps: Iterator[bool]
    many_values: bool


class AnalysisWorker:
    def __init__(
        self,
        settings: Settings,
        on_findings: Callable[[Exchange, Findings, float], None],
        on_skip: Callable[[Exchange, str], None],
        *,
        max_pending: int | None = None,
        max_pending_chars: int = 256 << 20,
        link_factory: LinkFactory = open_link,
        spare_cpu: Callable[[], float | None] | None = None,
        cpus: int | None = None,
    ) -> None:
        self._settings = settings
        # The machine's idle cores (tests give their own), and its cores.
        machine = SpareCpu()
        self._spare_cpu = spare_cpu if spare_cpu is not None else machine.cores
        self._cpus = cpus if cpus is not None else machine.cpus
        self._on_findings = on_findings
        self._on_skip = on_skip
        self._max_pending = max_pending or settings.queue_size
        self._max_pending_chars = max_pending_chars
        self._link_factory = link_factory
        self._mode = settings.analysis
        self._reset_state()
        _WORKERS.add(self)

    def _reset_state(self) -> None:
        self._condition = threading.Condition()
        self._queue: deque[tuple[Exchange, int]] = deque()
        self._sent: OrderedDict[int, _Sent] = OrderedDict()
        self._sending: _Sending | None = None
        self._arrived: deque[Message] = deque()
        # (time.monotonic() when kept, request, response)
        self._to_release: deque[tuple[float, object, object]] = deque()
        self._pending_chars = 0
        self._next_seq = 0
        self._idle = True
        self._in_round = False
        self._stopping = False
        self._started = False
        self._thread: threading.Thread | None = None
        self._link: Link | None = None
        self._failures = 0
        self._retry_at = 0.0
        self._next_expiry = 0.0
        self._link_full = False
        self._full_since = 0.0
        self._yielding = False
        self._helper_share = CpuShare(HELPER_SHARE, HELPER_BANK_S)
        self._helper_cost = HelperCost()
        self._ready = threading.Event()
        self.status: AnalystStatus | None = None

    # --- the caller's side ----------------------------------------------------------------
    def start(self) -> None:
        with self._condition:
            self._started = True
            self._stopping = False
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
                self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        handled = False  # queued, or handed to on_skip: exactly one of the two, once
        try:
            IN_FLIGHT.discard(exchange)  # over, even if a path never called finish()
            weight = payload_chars(exchange.request) + payload_chars(exchange.response)
            IN_FLIGHT.settling(settle_seconds(weight, exchange.response_crosses_transport))
            with self._condition:
                accepted = (
                    not self._stopping
                    and len(self._queue) + len(self._sent) < self._max_pending
                    and self._pending_chars + weight <= self._max_pending_chars
                )
                if accepted:
                    self._queue.append((exchange, weight))
                    handled = True
                    self._pending_chars += weight
                    if self._idle:
                        self._condition.notify()
                    if self._thread is None and self._started:  # in a forked child
                        self.start()
            if not accepted:
                handled = True
                self._on_skip(exchange, semconv.SKIP_OVERLOAD)
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
            if not handled:
                self._skip_quietly(exchange, semconv.SKIP_OVERLOAD)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the analysis has its tokenizer loaded; whether it has."""
        return self._ready.wait(timeout)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every submitted exchange has been recorded or skipped; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._has_work():
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(0.05 if remaining is None else min(remaining, 0.05))
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Record what is in hand (up to `timeout`), then stop; leftovers are skipped."""
        self.drain(timeout)
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
        self._close_link()

    @property
    def pending(self) -> int:
        return len(self._queue) + len(self._sent)

    @property
    def mode(self) -> str:
        """Where the analysis runs: in a helper process, or on a thread."""
        return self._mode

    # --- the worker thread ----------------------------------------------------------------
    def _has_work(self) -> bool:
        # A round in progress may hold an exchange taken from the queue or the sent ones
        # and not recorded yet (its span not ended): drain() waits for the round too.
        return bool(
            self._in_round or self._queue or self._sent or self._sending or self._arrived or self._to_release
        )

    def _run(self) -> None:
        used = 0.0
        with contextlib.suppress(Exception):
            self._publish_helper_share()
        while True:
            with self._condition:
                # Until the analysis reports ready, keep going: the link opens at once (the
                # helper loads its tokenizer meanwhile) and its first message is read.
                while not self._stopping and not self._has_work() and self._ready.is_set():
                    self._idle = True
                    self._condition.notify_all()  # drain() waiters
                    self._condition.wait()
                self._idle = False
                if self._stopping:
                    break
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
        self._abandon_sent(semconv.SKIP_SHUTDOWN)

    def _pause_before_round(self, used: float) -> None:
        spacing = BUSY_ROUND_S if self._sustained() else ROUND_S
        time.sleep(max(spacing, BUSY_RATIO * used))
        link = self._link
        if link is None:  # waiting to restart the analysis
            time.sleep(max(0.0, min(self._retry_at - time.monotonic(), 1.0)))
            return
        if self._link_full or not (self._queue or self._sending or self._arrived):
            # Only answers to wait for (or a full pipe, which the helper empties before it
            # answers): wake when they come, not every round.
            link.wait(AWAIT_S)
        deferral = self._deferral_s()
        if deferral > 0:
            IN_FLIGHT.wait_until_quiet(deferral)

    def _deferral_s(self) -> float:
        """How much longer the work in hand may wait for calls in flight: until `MAX_LAG_S`
        after the oldest pending exchange's response, and not at all with the queue half
        full (waiting would fill it). 0 means sustained load: work alongside the calls."""
        with self._condition:
            if 2 * (len(self._queue) + len(self._sent)) >= self._max_pending:
                return 0.0
            oldest = self._queue[0][0].end_ns if self._queue else 0
            if self._sent:
                first = next(iter(self._sent.values())).exchange.end_ns
                oldest = min(oldest, first) if oldest else first
        if not oldest:
            return MAX_LAG_S
        return MAX_LAG_S - (time.time_ns() - oldest) / 1e9

    def _sustained(self) -> bool:
        """Calls are in flight and the work in hand may not wait for them any longer. A
        backlog older than that with no call in flight is handled at full pace."""
        return self._deferral_s() <= 0 and IN_FLIGHT.busy()

    def _round(self, started: float) -> None:
        link = self._current_link()
        if link is None:
            return
        self._publish_helper_share()  # what the helper may take beside calls, kept current
        self._yielding = not self._sustained()
        try:
            self._arrived.extend(link.receive())
            self._handle_arrived(started)
            self._send(link, started)
            self._release_payloads(started)
        except LinkClosed as exc:
            self._lose_link(link, str(exc))
        if time.monotonic() >= self._next_expiry:
            self._next_expiry = time.monotonic() + EXPIRY_EVERY_S
            self._expire_sent()

    def _current_link(self) -> Link | None:
        if self._link is not None:
            return self._link
        if time.monotonic() < self._retry_at:
            return None
        try:
            self._link = self._link_factory(self._settings, self._mode)
        except Exception as exc:
            self._link_failed(f"could not start ({exc})", started=False)
        return self._link

    def _lose_link(self, link: Link, reason: str) -> None:
        self._close_link()
        self._abandon_sent(semconv.SKIP_ERROR)
        self._link_failed(reason, started=link.started)

    def _link_failed(self, reason: str, *, started: bool) -> None:
        if not started and self._mode == ANALYSIS_PROCESS:
            _logger.warning("mcp-tokens: the analysis helper %s; analysing on a thread instead", reason)
            self._mode = ANALYSIS_THREAD
            return
        self._failures += 1
        pause = min(MAX_RESTART_PAUSE_S, RESTART_PAUSE_S * 2 ** (self._failures - 1))
        self._retry_at = time.monotonic() + pause
        _logger.warning("mcp-tokens: the analysis %s; restarting it in %.0f s", reason, pause)

    def _close_link(self) -> None:
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(Exception):
                link.close()

    def _handle_arrived(self, started: float) -> None:
        arrived = self._arrived
        while arrived and self._may_go_on(started):
            message = arrived.popleft()
            if isinstance(message, AnalystStatus):
                self.status = message
                self._failures = 0
                self._ready.set()
                continue
            with self._condition:
                sent = self._sent.pop(message.seq, None)
                if sent is not None:
                    self._pending_chars -= sent.weight
            if sent is not None:  # else given up already
                self._helper_cost.observe(message.analysis_s, sent.weight)
                self._deliver(sent, message)

    def _deliver(self, sent: _Sent, findings: Findings) -> None:
        try:
            self._on_findings(sent.exchange, findings, sent.send_s)
        except Exception:
            _logger.debug("mcp-tokens could not record an analysis", exc_info=True)

    def _send(self, link: Link, started: float) -> None:
        if self._helper_holds_all_it_may():
            self._shed_queued(started)
        full = not (self._send_steps(link, started) and link.flush())
        if full and not self._link_full:
            self._full_since = time.monotonic()
        self._link_full = full

    def _send_steps(self, link: Link, started: float) -> bool:
        """Step through the queued exchanges' sending; False when the link is full."""
        while self._may_go_on(started):
            if self._sending is None:
                item = self._take_queued()
                if item is None:
                    return True
                self._sending = self._start_sending(link, *item, hold=self._must_hold(item[1]))
            sending = self._sending
            cpu = time.thread_time()
            step = next(sending.steps, None)
            sent = self._sent.get(sending.seq)
            if sent is not None:
                sent.send_s += time.thread_time() - cpu
            if step is False:
                return False
            if step is None:
                self._sending = None
                if sent is not None:
                    sent.sent_at = time.monotonic()
                    self._let_go(sent.exchange, sending.many_values)
        return True

    def _must_hold(self, weight: int) -> bool:
        """Whether the helper must hold this exchange for a quiet moment: calls go on past
        the time the worker may wait for them (sustained load) and the helper's share of
        CPU beside them is spent. In a quiet moment the helper competes with nothing: what
        it costs then is not charged. (The share is the one `_round` published.)"""
        return self._beside_calls() and not self._helper_share.take(self._helper_cost.of(weight))

    def _beside_calls(self) -> bool:
        """Sustained load this round, and a call in flight right now."""
        return not self._yielding and IN_FLIGHT.busy()

    def _helper_holds_all_it_may(self) -> bool:
        """Sustained load, and the link has stayed full for `LINK_STUCK_S`: the helper holds
        all it may (or is that far behind). What is queued would only fill the queue, and
        then be dropped on the callers' path."""
        stuck = self._link_full and time.monotonic() - self._full_since >= LINK_STUCK_S
        return stuck and self._beside_calls()

    def _shed_queued(self, started: float) -> None:
        while self._may_go_on(started):
            item = self._take_queued()
            if item is None:
                return
            self._shed(*item)

    def _publish_helper_share(self) -> None:
        """The helper's share of idle CPU: for the worker's sending, and on the activity
        board for the helper's waits."""
        share = helper_share(self._spare_cpu(), self._cpus)
        self._helper_share.share = share
        IN_FLIGHT.set_helper_share(share)

    def _let_go(self, exchange: Exchange, many_values: bool) -> None:
        """Drop our references to the payloads (the analysis has them now). Ours may be the
        last: freeing a payload of many values holds the GIL for as long as it takes (about
        10 ms per 100,000 objects), so such a payload is kept (see `_release_payloads`)."""
        if many_values and len(self._to_release) < MAX_KEPT_PAYLOADS:
            self._to_release.append((time.monotonic(), exchange.request, exchange.response))
        exchange.request = exchange.response = None

    def _release_payloads(self, started: float) -> None:
        """Free kept payloads while no call is in flight (and within the round's budget);
        one a round once the oldest has been kept `MAX_KEEP_S`."""
        kept = self._to_release
        while kept:
            if time.monotonic() - kept[0][0] >= MAX_KEEP_S:
                kept.popleft()
                return
            if time.thread_time() - started >= ROUND_BUDGET_S or IN_FLIGHT.busy():
                return
            kept.popleft()

    def _may_go_on(self, started: float) -> bool:
        """Within the round's CPU budget, and (while it may still wait) no call started."""
        budget = ROUND_BUDGET_S if self._yielding else BUSY_ROUND_BUDGET_S
        if time.thread_time() - started >= budget:
            return False
        if not self._yielding:
            yield_gil()
            return True
        return not IN_FLIGHT.busy()

    def _take_queued(self) -> tuple[Exchange, int] | None:
        with self._condition:
            return self._queue.popleft() if self._queue else None

    def _shed(self, exchange: Exchange, weight: int) -> None:
        with self._condition:
            self._pending_chars -= weight
        self._skip_quietly(exchange, semconv.SKIP_OVERLOAD)

    def _start_sending(self, link: Link, exchange: Exchange, weight: int, *, hold: bool) -> _Sending:
        with self._condition:
            seq = self._next_seq
            self._next_seq += 1
            self._sent[seq] = _Sent(exchange, weight)
            # Half the characters the queue may hold: exact counting is not keeping up.
            behind = 2 * self._pending_chars >= self._max_pending_chars
        job = job_of(exchange, seq, behind, hold)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        many_values = needs_slicing(request, response, by_chars=False)
        return _Sending(seq, link.sender(job, request, response), many_values)

    def _expire_sent(self) -> None:
        """Give up findings that do not come back (a helper starved of CPU, or stuck)."""
        cutoff = time.monotonic() - OUTSTANDING_TIMEOUT_S
        expired: list[_Sent] = []
        with self._condition:
            while self._sent:
                seq, sent = next(iter(self._sent.items()))
                if not sent.sent_at or sent.sent_at > cutoff:
                    break
                del self._sent[seq]
                self._pending_chars -= sent.weight
                expired.append(sent)
        for sent in expired:
            self._skip_quietly(sent.exchange, semconv.SKIP_OVERLOAD)

    def _abandon_sent(self, reason: str) -> None:
        """The analysis will not answer for what it holds: skip all of it."""
        with self._condition:
            abandoned = list(self._sent.values())
            self._sent.clear()
            self._sending = None
            self._arrived.clear()
            self._pending_chars -= sum(sent.weight for sent in abandoned)
            self._condition.notify_all()
        for sent in abandoned:
            self._skip_quietly(sent.exchange, reason)

    def _skip_quietly(self, exchange: Exchange, reason: str) -> None:
        try:
            self._on_skip(exchange, reason)
        except Exception:
            _logger.debug("mcp-tokens could not skip an exchange", exc_info=True)

    # --- fork -------------------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """The worker thread and the helper belong to the parent; what the parent had queued
        is the parent's to record. Start afresh on the next exchange."""
        link = self._link
        started = self._started
        mode = self._mode
        if link is not None:
            with contextlib.suppress(Exception):
                link.forget()
        self._reset_state()
        self._mode = mode
        self._started = started


def job_of(exchange: Exchange, seq: int, behind: bool, hold: bool = False) -> Job:
    return Job(
        seq=seq,
        side=exchange.side,
        method=exchange.method,
        target=exchange.target,
        server_name=exchange.server_name,
        error_type=exchange.error_type,
        budget=exchange.budget,
        end_ns=exchange.end_ns,
        request_kind=exchange.request_kind,
        response_kind=exchange.response_kind,
        behind=behind,
        hold=hold,
    )


_WORKERS: weakref.WeakSet[AnalysisWorker] = weakref.WeakSet()


def _reset_workers_in_child() -> None:
    for worker in list(_WORKERS):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_in_child)
