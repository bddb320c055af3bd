# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumented process's side of counting: a bounded queue and one thread.

`submit()` runs on the caller's path: it never blocks and never raises. It appends the
finished exchange to a queue bounded by count (`QUEUE_SIZE`, exchanges queued or at the
counter) and by the payload characters this process holds for it (`Options.queue_chars`).
Past either bound the exchange is not lost: it is recorded at once with an estimate from
its length (`overload`).

The first exchange starts the thread (`mcp-tokens-analysis`), which connects to the
user's counting service (counting/, started if none runs) and then, for every exchange:
encodes its payloads for the service a short step at a time, handing the GIL to a waiting
thread (an event loop) every `slice_s`; hands the findings that come back to the sink
(the pipeline records them); and ends a span that waited `SPAN_WAIT` for its findings
with an estimate (the exact count still reaches the metrics when it comes). It sleeps on
the service's socket and a wake-up socket, so it costs nothing while nothing happens.

When the service goes away (killed, crashed), what it held is recorded with estimates
(`analysis_error`) and a new service is started, at once and then after pauses that
double with each failure. Where no service can run at all, the analysis runs on this
thread instead (`ThreadLink`), as with `ANALYSIS=thread`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from . import semconv
from .config import ANALYSIS_PROCESS, ANALYSIS_THREAD, Settings
from .counting.options import OPTIONS, Options
from .engine.blocks import payload_chars
from .exchange import Exchange

if TYPE_CHECKING:
    from .analyst import AnalystStatus, Findings

_logger = logging.getLogger(__name__)

# How long the worker waits for a service to start (or answer) before it gives up on it.
START_TIMEOUT_S = 10.0
# Pauses before starting a service anew after it went away: none the first time, then
# doubling from the first, up to the last.
_RESTART_PAUSE_S = 1.0
_MAX_RESTART_PAUSE_S = 60.0
_LOAD_POLL_S = 0.05


class Link(Protocol):
    """A way to the analysis: the counting service (counting/client.py), or `ThreadLink`."""

    status: AnalystStatus | None

    @property
    def unsent(self) -> int: ...

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[None]: ...

    def flush(self) -> bool: ...

    def receive(self) -> list[Findings]: ...

    def fileno(self) -> int | None: ...

    def close(self) -> None: ...

    def forget(self) -> None: ...


class Sink(Protocol):
    """Where exchanges end up (the pipeline): each exactly once, by one of the three."""

    def record(self, exchange: Exchange, findings: Findings, send_s: float) -> None: ...

    def estimate(self, exchange: Exchange, reason: str) -> None: ...

    def end_span_late(self, exchange: Exchange) -> None:
        """The span waited long enough: it ends with an estimate (the exchange is still
        recorded later, by `record` or `estimate`)."""
        ...


LinkFactory = Callable[[Settings, Options, str, Callable[[], None]], "Link"]


def open_link(settings: Settings, options: Options, mode: str, pause: Callable[[], None]) -> Link:
    """The analysis' modules are imported here, on the worker's thread at the first exchange,
    so that a process that never sees an MCP message never loads them."""
    if mode == ANALYSIS_PROCESS:
        from .counting.client import ServiceLink  # noqa: PLC0415 -- loaded at the first exchange

        return ServiceLink(settings, options, START_TIMEOUT_S)
    from .thread_link import ThreadLink  # noqa: PLC0415 -- loaded at the first exchange

    return ThreadLink(settings, options, pause)


@dataclass(slots=True)
class _Held:
    """An exchange handed over, until it is recorded."""

    exchange: Exchange
    chars: int  # payload characters this process holds for it until it is sent
    send_s: float = 0.0  # CPU time spent encoding it


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
        self._condition = threading.Condition()
        self._queued: deque[_Held] = deque()
        self._sent: OrderedDict[int, _Held] = OrderedDict()
        self._open_spans: deque[tuple[int, Exchange]] = deque()  # (deadline ns, exchange)
        self._held_chars = 0  # queued payload characters
        self._unsent = 0  # bytes the link has not handed to the service yet
        self._next_seq = 0
        self._stopping = False
        self._asleep = False
        self._thread: threading.Thread | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._link: Link | None = None
        self._ever_linked = False
        self._failures = 0
        self._retry_at = 0.0
        self._ready = threading.Event()
        self._gil_since = time.perf_counter()
        self.status: AnalystStatus | None = None

    # --- the caller's side ----------------------------------------------------------------
    def submit(self, exchange: Exchange) -> None:
        handled = False  # queued, or handed to the sink: exactly one of the two, once
        try:
            exchange.request_chars = _chars(exchange.request_kind, exchange.request)
            exchange.response_chars = _chars(exchange.response_kind, exchange.response)
            weight = (exchange.request_chars or 0) + (exchange.response_chars or 0)
            with self._condition:
                if self._accepts(weight):
                    self._start_or_wake()  # raises where no thread can start
                    self._queued.append(_Held(exchange, weight))
                    self._held_chars += weight
                    if exchange.span is not None and exchange.end_span:
                        deadline = (exchange.end_ns or time.time_ns()) + int(self._settings.span_wait * 1e9)
                        self._open_spans.append((deadline, exchange))
                    handled = True
            if not handled:
                handled = True
                self._sink.estimate(exchange, semconv.SKIP_OVERLOAD)
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
            if not handled:
                self._estimate_quietly(exchange, semconv.SKIP_OVERLOAD)

    def _accepts(self, weight: int) -> bool:
        return (
            not self._stopping
            and len(self._queued) + len(self._sent) < self._settings.queue_size
            and self._held_chars + self._unsent + weight <= self._options.queue_chars
        )

    def _start_or_wake(self) -> None:
        if self._thread is None:
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
            thread.start()
            self._thread = thread
        elif self._asleep and self._wake_w is not None:
            self._asleep = False
            with contextlib.suppress(OSError):  # full: a wake-up is pending anyway
                self._wake_w.send(b"\0")

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start the analysis if no exchange has, and wait until its tokenizer is loaded
        (tests and benchmarks); whether it is."""
        with self._condition:
            if not self._stopping:
                self._start_or_wake()
        return self._ready.wait(timeout)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Wait until every submitted exchange is recorded; False when `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._queued or self._sent:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(0.05 if remaining is None else min(remaining, 0.05))
        return True

    def shutdown(self, timeout: float = 5.0) -> None:
        """Record what comes back within `timeout` seconds, then stop: what is left is
        recorded with estimates (`shutdown`), the link is closed. Later exchanges are
        estimated at once."""
        self.force_flush(timeout)
        with self._condition:
            self._stopping = True
            thread = self._thread
            if thread is not None:
                self._asleep = True
                self._start_or_wake()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def mode(self) -> str:
        """Where the analysis runs: the counting service (`process`) or this thread."""
        return self._mode

    # --- the worker thread ----------------------------------------------------------------
    def _run(self) -> None:
        try:
            while not self._stopping:
                link = self._current_link()
                self._sleep(link)
                self._end_late_spans()
                if link is None or self._stopping:
                    continue
                try:
                    self._take_findings(link)
                    self._send(link)
                    self._take_findings(link)  # a link on this thread answers as it is sent
                except Exception as exc:  # a closed link, or a fault of ours: the same remedy
                    self._lose_link(link, str(exc) or type(exc).__name__)
        finally:
            self._finish()

    def _sleep(self, link: Link | None) -> None:
        """Wait for findings, a new exchange, the service taking bytes, or the next deadline."""
        with self._condition:
            self._condition.notify_all()  # force_flush() waiters
            timeout = self._timeout(link)
            self._asleep = timeout != 0
        if timeout == 0:
            return
        fd = None if link is None else link.fileno()
        readers = [fd] if fd is not None else []
        if self._wake_r is not None:
            readers.append(self._wake_r.fileno())
        writers = [fd] if fd is not None and self._unsent else []
        with contextlib.suppress(OSError, ValueError):
            select.select(readers, writers, [], timeout)
        with self._condition:
            self._asleep = False
        with contextlib.suppress(OSError):
            while self._wake_r is not None and self._wake_r.recv(256):
                pass

    def _timeout(self, link: Link | None) -> float | None:
        if self._stopping or (self._queued and link is not None):
            return 0
        timeouts = []
        if link is not None and link.status is None:
            timeouts.append(_LOAD_POLL_S)  # a tokenizer loading on this process's thread
        if link is None:
            timeouts.append(max(0.0, self._retry_at - time.monotonic()))
        if self._open_spans:
            timeouts.append(max(0.0, (self._open_spans[0][0] - time.time_ns()) / 1e9))
        return min(timeouts) if timeouts else None

    def _current_link(self) -> Link | None:
        if self._link is not None or time.monotonic() < self._retry_at:
            return self._link
        try:
            self._link = self._link_factory(self._settings, self._options, self._mode, self.yield_gil)
            self._ever_linked = True
        except Exception as exc:
            if self._mode == ANALYSIS_PROCESS and not self._ever_linked:
                _logger.warning("mcp-tokens: no counting service (%s); counting on a thread instead", exc)
                self._mode = ANALYSIS_THREAD
                return self._current_link()
            self._back_off(f"could not start ({exc})")
        return self._link

    def _lose_link(self, link: Link, reason: str) -> None:
        self._link = None
        with contextlib.suppress(Exception):
            link.close()
        with self._condition:
            lost = list(self._sent.values())
            self._sent.clear()
            self._unsent = 0
        for held in lost:
            self._estimate_quietly(held.exchange, semconv.SKIP_ERROR)
        self._back_off(reason)

    def _back_off(self, reason: str) -> None:
        self._failures += 1
        pause = (
            0.0
            if self._failures == 1
            else min(_MAX_RESTART_PAUSE_S, _RESTART_PAUSE_S * 2 ** (self._failures - 2))
        )
        self._retry_at = time.monotonic() + pause
        _logger.warning("mcp-tokens: the counting service %s; starting it again in %.0f s", reason, pause)

    # --- exchanges ------------------------------------------------------------------------
    def _take_findings(self, link: Link) -> None:
        arrived = link.receive()
        if link.status is not None and not self._ready.is_set():
            self.status = link.status
            self._failures = 0
            self._ready.set()
        for findings in arrived:
            with self._condition:
                held = self._sent.pop(findings.seq, None)
            if held is not None:
                try:
                    self._sink.record(held.exchange, findings, held.send_s)
                except Exception:
                    _logger.debug("mcp-tokens could not record an analysis", exc_info=True)
            self.yield_gil()

    def _send(self, link: Link) -> None:
        """Encode every queued exchange for the link, then send what the socket takes."""
        while True:
            with self._condition:
                if not self._queued:
                    break
                held = self._queued.popleft()
                seq = self._next_seq
                self._next_seq += 1
                self._sent[seq] = held
                behind = self._held_chars + self._unsent >= self._options.behind_chars
            cpu = time.thread_time()
            for _ in link.sender(held.exchange, seq, behind):
                self.yield_gil()
            held.send_s = time.thread_time() - cpu
            held.exchange.request = held.exchange.response = None  # the link has them now
            with self._condition:
                self._held_chars -= held.chars
                self._unsent = link.unsent
        link.flush()
        with self._condition:
            self._unsent = link.unsent

    def _end_late_spans(self) -> None:
        now = time.time_ns()
        while self._open_spans and self._open_spans[0][0] <= now:
            _, exchange = self._open_spans.popleft()
            if exchange.span is not None:
                try:
                    self._sink.end_span_late(exchange)
                except Exception:
                    _logger.debug("mcp-tokens could not end a span", exc_info=True)

    def yield_gil(self) -> None:
        """Let a thread waiting for the GIL (an event loop) have it, if we held it `slice_s`:
        a short sleep, since with a zero one the sleeper usually takes it straight back."""
        if time.perf_counter() - self._gil_since >= self._options.slice_s:
            time.sleep(self._options.slice_s / 5)
            self._gil_since = time.perf_counter()

    def _finish(self) -> None:
        with self._condition:
            left = [*self._queued, *self._sent.values()]
            self._queued.clear()
            self._sent.clear()
            self._held_chars = 0
            self._condition.notify_all()
        for held in left:
            self._estimate_quietly(held.exchange, semconv.SKIP_SHUTDOWN)
        link, self._link = self._link, None
        if link is not None:
            with contextlib.suppress(Exception):
                link.close()

    def _estimate_quietly(self, exchange: Exchange, reason: str) -> None:
        try:
            self._sink.estimate(exchange, reason)
        except Exception:
            _logger.debug("mcp-tokens could not record an estimate", exc_info=True)

    # --- fork -------------------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        """The thread and the connection belong to the parent; what it had queued is the
        parent's to record. The child starts its own on its first exchange."""
        if self._link is not None:
            with contextlib.suppress(Exception):
                self._link.forget()
        for sock in (self._wake_r, self._wake_w):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self._reset_state()


def _chars(kind: str | None, payload: object) -> int | None:
    """A payload's characters (None: no payload a model is shown, nothing to count)."""
    return None if kind is None or payload is None else payload_chars(payload)


_WORKERS: weakref.WeakSet[AnalysisWorker] = weakref.WeakSet()


def _reset_workers_in_child() -> None:
    for worker in list(_WORKERS):
        worker._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_workers_in_child)
