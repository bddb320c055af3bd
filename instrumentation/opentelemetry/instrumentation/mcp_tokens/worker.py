# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumented process's side of counting: a bounded queue and one thread.

`submit()` runs on the caller's path and never blocks or raises: it queues the finished
exchange, within `QUEUE_SIZE` exchanges (queued, or at the counter) and
`Options.queue_chars` payload characters held here. Past either the exchange is not lost:
the sink records it with an estimate from its length (`overload`). Weighing a payload
(adding up its strings' characters) is a walk over it, so the caller leaves it to the
worker for up to `_UNWEIGHED` exchanges at a time, and the worker holds each to the
character bound when it takes it from the queue: past the bound by at most those.

The first exchange starts the thread (`mcp-tokens-analysis`; `mcp-tokens` in `top -H`). It
connects to the user's counting service (counting/; started if none runs) and in rounds at
least `linger_s` apart sends the queued exchanges, hands the findings that came back to the
sink, and ends with an estimate each span that waited `SPAN_WAIT` (its exact count still
reaches the metrics). Between rounds it sleeps on the service's socket and a wake-up socket.
The first exchange queued while it sleeps wakes it `linger_s` later, so that the call's other
exchanges join the round. Within `_WATCHFUL_S` of its last exchange the thread sleeps at
most `SPAN_WAIT` at a time, and a caller on an asyncio event loop then has the loop send
that wake-up (`call_later`): the thread takes the GIL once the call is done with it, not
in the middle of it, as it must when woken at once. Should the loop never send it (it
stopped), the thread's own timeout still comes within `SPAN_WAIT`. Otherwise (no loop, or
the thread sleeps without a timeout, idle for a while) it is woken at once.

If the service goes away, what it held is estimated (`analysis_error`) and a service is
started again at once, then after pauses that double. Where none can run at all, the
analysis runs on this thread (thread_link.py), as with `ANALYSIS=thread`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import socket
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from . import os_names, semconv
from .config import ANALYSIS_PROCESS, ANALYSIS_THREAD, Settings
from .counting.options import OPTIONS, Options
from .engine.blocks import payload_chars
from .exchange import Exchange

if TYPE_CHECKING:
    from .analyst import AnalystStatus, Findings

_logger = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0  # for a service to start and answer
# Exchanges queued before they are weighed, at most: a call's few (both sides of an
# in-process call, a burst of notifications) leave the walk to the worker; beyond them the
# caller weighs, so that what the process holds past `queue_chars` stays this bounded.
_UNWEIGHED = 16
_MAX_RESTART_PAUSE_S = 60.0
# How long after its last exchange the thread sleeps at most SPAN_WAIT at a time (then
# without a timeout): the time an event loop may be trusted with its wake-up.
_WATCHFUL_S = 60.0


class Link(Protocol):
    """The way to the analysis: the counting service (counting/client.py) or `ThreadLink`."""

    status: AnalystStatus | None  # set once its tokenizer is loaded

    @property
    def unsent(self) -> int: ...  # bytes not yet taken

    def send(self, exchange: Exchange, seq: int, behind: bool) -> None: ...

    def flush(self) -> None: ...

    def receive(self) -> list[Findings]: ...  # raises LinkClosed at its end

    def fileno(self) -> int | None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """Where exchanges end up (the pipeline): `record` or `estimate`, once each."""

    def record(self, exchange: Exchange, findings: Findings, send_s: float) -> None: ...

    def estimate(self, exchange: Exchange, reason: str) -> None: ...

    def end_span_late(self, exchange: Exchange) -> None: ...


LinkFactory = Callable[[Settings, Options, str, Callable[[], None]], Link]


def open_link(settings: Settings, options: Options, mode: str, pause: Callable[[], None]) -> Link:
    # Imported here, at the first exchange: a process that never speaks MCP never loads them.
    if mode == ANALYSIS_PROCESS:
        from .counting.client import ServiceLink  # noqa: PLC0415

        return ServiceLink(settings, options, START_TIMEOUT_S)
    from .thread_link import ThreadLink  # noqa: PLC0415

    return ThreadLink(settings, pause)


class AnalysisWorker:
    def __init__(
        self,
        settings: Settings,
        sink: Sink,
        *,
        options: Options = OPTIONS,
        link_factory: LinkFactory = open_link,
    ) -> None:
        self._settings = settings
        self._sink = sink
        self._options = options
        self._link_factory = link_factory
        self._mode = settings.analysis
        self._reset_state()
        _WORKERS.add(self)

    def _reset_state(self) -> None:
        # Held with `with self._lock` (a C call; a Condition's own `with` is two Python
        # calls, on every exchange); the condition wakes force_flush() waiters.
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        # Queued exchanges, each with its weight (None: left for this thread to weigh).
        self._queued: deque[tuple[Exchange, int | None]] = deque()
        self._sent: OrderedDict[int, tuple[Exchange, float]] = OrderedDict()  # seq -> (it, CPU to send)
        # Spans still open, by id(exchange), in the order their deadlines (ns) come: an
        # exchange leaves when its span ends, so that what is held is what is in flight.
        self._open_spans: OrderedDict[int, tuple[int, Exchange]] = OrderedDict()
        self._held_chars = 0  # payload characters queued (those weighed)
        self._unweighed = 0  # exchanges queued not yet weighed
        self._unsent = 0  # bytes the link has not handed over
        self._next_seq = 0
        self._stopping = self._asleep = self._linked = False
        self._thread: threading.Thread | None = None
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._link: Link | None = None
        self._failures = 0
        self._retry_at = self._round_at = 0.0
        # When the first exchange queued while the thread slept arrived, and when the last
        # one was sent (monotonic); when the wake-up an event loop was asked to send is due
        # (None: none is).
        self._first_at = self._sent_at = 0.0
        self._wake_due: float | None = None
        self._watchful = False  # the thread sleeps with a timeout of at most SPAN_WAIT
        self._gil_since = time.perf_counter()
        self._ready = threading.Event()
        self.status: AnalystStatus | None = None

    # --- the caller's side ----------------------------------------------------------------
    def submit(self, exchange: Exchange) -> None:
        queued = False
        try:
            with self._lock:
                if self._unweighed < _UNWEIGHED and self._has_room(0):
                    self._enqueue(exchange, None)
                    self._unweighed += 1
                    queued = True
            if not queued:
                weight = _weigh(exchange)
                with self._lock:
                    if self._has_room(weight):
                        self._enqueue(exchange, weight)
                        self._held_chars += weight
                        queued = True
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
        if not queued:
            self._estimate(exchange, semconv.SKIP_OVERLOAD)

    def _has_room(self, weight: int) -> bool:
        return (
            not self._stopping
            and len(self._queued) + len(self._sent) < self._settings.queue_size
            and self._fits(weight)
        )

    def _fits(self, weight: int) -> bool:
        """Whether `weight` more payload characters stay within `queue_chars` (lock held)."""
        return self._held_chars + self._unsent + weight <= self._options.queue_chars

    def _enqueue(self, exchange: Exchange, weight: int | None) -> None:
        self._start_or_wake()  # raises where no thread can start
        self._queued.append((exchange, weight))
        if exchange.span is not None and exchange.end_span:
            wait_ns = int(self._settings.span_wait * 1e9)
            self._open_spans[id(exchange)] = ((exchange.end_ns or time.time_ns()) + wait_ns, exchange)

    def _start_or_wake(self, *, now: bool = False) -> None:
        """Start the thread, or have it woken if it sleeps: `linger_s` after the first
        exchange of a round (see the module's docstring), or at once (lock held)."""
        if self._thread is None:
            self._wake = socket.socketpair()
            for end in self._wake:
                end.setblocking(False)
            self._thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
            self._thread.start()
        elif self._asleep and self._wake is not None:
            if self._wake_due is None:
                self._first_at = time.monotonic()
            if now or not self._watchful or not self._wake_later():
                self._asleep = False
                self._wake_due = None
                with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
                    self._wake[1].send(b"\0")

    def _wake_later(self) -> bool:
        """Have the caller's event loop wake the thread `linger_s` after the round's first
        exchange; False when the caller runs no asyncio loop, or the one asked has not
        sent the wake-up it owes (it stopped, or is blocked): the thread is woken now."""
        due, now = self._wake_due, time.monotonic()
        if due is not None:
            return now < due + self._options.linger_s
        try:
            asyncio.get_running_loop().call_later(self._options.linger_s, self._woken_by_loop)
        except Exception:  # no loop runs on this thread (or it takes no timer)
            return False
        self._wake_due = now + self._options.linger_s
        return True

    def _woken_by_loop(self) -> None:
        # Runs on the application's loop: a failure would reach its exception handler.
        try:
            with self._lock:
                if self._wake_due is not None:
                    self._start_or_wake(now=True)
        except Exception:
            _logger.debug("mcp-tokens could not wake its analysis thread", exc_info=True)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start counting if no exchange has, and wait for its tokenizer (tests, benchmarks)."""
        with self._lock:
            if not self._stopping:
                self._start_or_wake(now=True)
        return self._ready.wait(timeout)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted exchange is recorded; False when `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            if self._queued and self._thread is not None:
                self._start_or_wake(now=True)
            while self._queued or self._sent:
                remaining = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        """Record what comes back within `timeout` seconds, then stop: what is left is
        estimated (`shutdown`), and so is every later exchange."""
        self.force_flush(timeout)
        with self._lock:
            self._stopping = self._asleep = True
            thread = self._thread
            if thread is not None:
                self._start_or_wake(now=True)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def mode(self) -> str:
        """Where the analysis runs: the counting service (`process`) or this thread."""
        return self._mode

    # --- the worker thread ----------------------------------------------------------------
    def _run(self) -> None:
        os_names.name_this_thread(os_names.ANALYSIS_THREAD)
        try:
            while not self._stopping:
                link = self._current_link()
                may_have_findings = self._sleep(link)
                self._end_late_spans()
                if link is not None and not self._stopping:
                    try:
                        if may_have_findings:
                            self._take_findings(link)
                        self._send(link)
                        if link.fileno() is None:  # a link on this thread answers as it is sent
                            self._take_findings(link)
                    except Exception as exc:  # a closed link, or a fault of ours: the same remedy
                        self._lose_link(link, str(exc) or type(exc).__name__)
        finally:
            with self._lock:
                left = [*(exchange for exchange, _ in self._queued), *(e for e, _ in self._sent.values())]
            for exchange in left:
                self._estimate(exchange, semconv.SKIP_SHUTDOWN)
            with self._lock:
                self._queued.clear()
                self._sent.clear()
                self._unweighed = 0
                self._condition.notify_all()
            if self._link is not None:
                with contextlib.suppress(Exception):
                    self._link.close()

    def _sleep(self, link: Link | None) -> bool:
        """Until findings, an exchange, room in the socket or a deadline; then at least until
        `linger_s` after the last round, so that what arrives meanwhile joins this one.
        Whether the link may have findings: its socket was readable, or not waited on.

        Every system call here releases the GIL, and while the application's thread wants
        it, each costs a hand-over and back: the thread reads only the sockets `select`
        found readable."""
        with self._lock:
            self._condition.notify_all()  # force_flush() waiters
            timeout = self._timeout(link)
            self._asleep = timeout != 0
            self._watchful = timeout is not None and timeout <= self._settings.span_wait
            self._wake_due = None  # a wake-up still owed is for the exchanges just handled
        fd = None if link is None else link.fileno()
        may_have_findings = True
        if timeout != 0 and self._wake is not None:
            wake = self._wake[0].fileno()
            readable: list[int] = [wake, *([fd] if fd is not None else [])]  # if select fails
            with contextlib.suppress(OSError, ValueError):
                readable, _, _ = select.select(
                    readable,
                    [fd] if fd is not None and self._unsent else [],
                    [],
                    timeout,
                )
            may_have_findings = fd is None or fd in readable
            if wake in readable:
                _drain(self._wake[0])
                # The round waits `linger_s` from the first exchange queued while the thread
                # slept: a wake-up sent at once comes while the call still runs (in a process
                # that is both client and server, the server's hand-off comes before the
                # client has its result), and the call's other exchanges join the round.
                with self._lock:
                    self._round_at = max(self._round_at, self._first_at)
        self._asleep = False
        linger = self._round_at + self._options.linger_s - time.monotonic()
        if linger > 0 and not self._stopping:
            time.sleep(linger)
        self._round_at = time.monotonic()
        self._gil_since = time.perf_counter()  # the GIL was just taken back: a slice starts
        return may_have_findings

    def _timeout(self, link: Link | None) -> float | None:
        if self._stopping or (self._queued and link is not None):
            return 0
        deadlines = []
        if link is None:
            deadlines.append(self._retry_at - time.monotonic())
        elif link.status is None:
            deadlines.append(self._options.linger_s)  # a tokenizer loading on this process's thread
        first = self._first_open_span()
        if first is not None:
            deadlines.append((first[0] - time.time_ns()) / 1e9)
        if link is not None and time.monotonic() - self._sent_at < _WATCHFUL_S:
            deadlines.append(self._settings.span_wait)
        return max(0.0, min(deadlines)) if deadlines else None

    def _current_link(self) -> Link | None:
        if self._link is None and time.monotonic() >= self._retry_at:
            try:
                self._link = self._link_factory(self._settings, self._options, self._mode, self.yield_gil)
                self._linked = True
            except Exception as exc:
                if self._mode == ANALYSIS_PROCESS and not self._linked:
                    _logger.warning("mcp-tokens: no counting service (%s); counting on a thread instead", exc)
                    self._mode = ANALYSIS_THREAD
                    return self._current_link()
                self._back_off(f"could not start ({exc})")
        return self._link

    def _lose_link(self, link: Link, reason: str) -> None:
        self._link = None
        with contextlib.suppress(Exception):
            link.close()
        with self._lock:
            lost = list(self._sent.items())
            self._unsent = 0
        for seq, (exchange, _) in lost:
            self._estimate(exchange, semconv.SKIP_ERROR)
            with self._lock:
                self._sent.pop(seq, None)
        self._back_off(reason)

    def _back_off(self, reason: str) -> None:
        self._failures += 1
        pause = min(_MAX_RESTART_PAUSE_S, 2.0 ** (self._failures - 2)) if self._failures > 1 else 0.0
        self._retry_at = time.monotonic() + pause
        _logger.warning("mcp-tokens: the counting service %s; starting it again in %.0f s", reason, pause)

    # --- exchanges ------------------------------------------------------------------------
    def _take_findings(self, link: Link) -> None:
        arrived = link.receive()
        if link.status is not None and not self._ready.is_set():
            self.status, self._failures = link.status, 0
            self._ready.set()
        for findings in arrived:
            with self._lock:
                exchange, send_s = self._sent.get(findings.seq, (None, 0.0))
            if exchange is not None:
                try:
                    self._sink.record(exchange, findings, send_s)
                except Exception:
                    _logger.debug("mcp-tokens could not record an analysis", exc_info=True)
                with self._lock:  # only now: force_flush() waits for the record too
                    self._sent.pop(findings.seq, None)
                    self._open_spans.pop(id(exchange), None)
            self.yield_gil()

    def _send(self, link: Link) -> None:
        while True:
            with self._lock:
                if not self._queued:
                    break
                exchange, weight = self._queued.popleft()
            if weight is None and not self._admit_weighed(exchange):
                self._estimate(exchange, semconv.SKIP_OVERLOAD)
                continue
            with self._lock:
                seq, self._next_seq = self._next_seq, self._next_seq + 1
                self._sent[seq] = (exchange, 0.0)
                behind = self._held_chars + self._unsent >= self._options.behind_chars
            cpu = time.thread_time()
            link.send(exchange, seq, behind)
            self._sent_at = time.monotonic()
            exchange.request = exchange.response = None  # the link has them now
            with self._lock:
                if seq in self._sent:
                    self._sent[seq] = (exchange, time.thread_time() - cpu)
                self._held_chars -= (exchange.request_chars or 0) + (exchange.response_chars or 0)
                self._unsent = link.unsent
            self.yield_gil()
        link.flush()
        with self._lock:
            self._unsent = link.unsent

    def _admit_weighed(self, exchange: Exchange) -> bool:
        """Weigh an exchange the caller left unweighed (a late span may have had it weighed
        already); False when it does not fit."""
        weight = _weigh(exchange)
        with self._lock:
            self._unweighed -= 1
            fits = self._fits(weight)
            if fits:
                self._held_chars += weight
        return fits

    def _first_open_span(self) -> tuple[int, Exchange] | None:
        """(deadline ns, exchange) of the open span whose deadline comes first (lock held)."""
        return next(iter(self._open_spans.values()), None)

    def _end_late_spans(self) -> None:
        now = time.time_ns()
        while True:
            with self._lock:
                first = self._first_open_span()
                if first is None or first[0] > now:
                    return
                exchange = first[1]
                del self._open_spans[id(exchange)]
            if exchange.span is not None:
                try:
                    _weigh(exchange)
                    self._sink.end_span_late(exchange)
                except Exception:
                    _logger.debug("mcp-tokens could not end a span", exc_info=True)

    def yield_gil(self) -> None:
        """Let a thread waiting for the GIL (an event loop) have it, if we held it `slice_s`:
        a short sleep, since with a zero one the sleeper usually takes it straight back."""
        if time.perf_counter() - self._gil_since >= self._options.slice_s:
            time.sleep(self._options.slice_s / 5)
            self._gil_since = time.perf_counter()

    def _estimate(self, exchange: Exchange, reason: str) -> None:
        try:
            _weigh(exchange)
            self._sink.estimate(exchange, reason)
        except Exception:
            _logger.debug("mcp-tokens could not record an estimate", exc_info=True)
        with self._lock:  # its span has ended
            self._open_spans.pop(id(exchange), None)

    def _after_fork_in_child(self) -> None:
        """The thread and the connection are the parent's, and so is what it had queued; the
        child starts its own on its first exchange."""
        for resource in (self._link, *(self._wake or ())):
            if resource is not None:
                with contextlib.suppress(Exception):
                    resource.close()
        self._reset_state()


def _drain(wake: socket.socket) -> None:
    """Read the wake-up socket empty (a full read means more may wait)."""
    with contextlib.suppress(OSError):
        while len(wake.recv(256)) == 256:
            pass


def _weigh(exchange: Exchange) -> int:
    """Set the exchange's payload characters (once); their sum."""
    if not exchange.weighed:
        exchange.weighed = True
        try:
            exchange.request_chars = _chars(exchange.request_kind, exchange.request)
            exchange.response_chars = _chars(exchange.response_kind, exchange.response)
        except Exception:  # a mapping that fails to be read: its characters go uncounted
            _logger.debug("mcp-tokens could not weigh a payload", exc_info=True)
    return (exchange.request_chars or 0) + (exchange.response_chars or 0)


def _chars(kind: str | None, payload: object) -> int | None:
    """A payload's characters (None: no payload a model is shown, nothing to count)."""
    return None if kind is None or payload is None else payload_chars(payload)


_WORKERS: weakref.WeakSet[AnalysisWorker] = weakref.WeakSet()


def _reset_workers_in_child() -> None:
    for worker in list(_WORKERS):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_in_child)
