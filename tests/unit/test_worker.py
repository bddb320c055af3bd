# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumented process's side of counting (worker.py), against a scripted link.

The link stands in for the counting service: it answers jobs when the test says so, can
hold them, stop taking bytes, break, or fail to start. What is checked is the worker's
contract: start nothing before the first exchange, never block or raise on the caller's
path, keep what it holds bounded, hand every exchange to the sink exactly once (recorded
or estimated: nothing is lost), end a span that waited too long with an estimate, survive
a lost service, stop cleanly.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens import worker as worker_module
from opentelemetry.instrumentation.mcp_tokens.analyst import AnalystStatus, Findings
from opentelemetry.instrumentation.mcp_tokens.config import ANALYSIS_THREAD, Settings
from opentelemetry.instrumentation.mcp_tokens.counting.client import LinkClosed
from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.worker import _UNWEIGHED, AnalysisWorker

READY = AnalystStatus("o200k_base", True, None, 1)


class ScriptedLink:
    """A link whose answers the test controls: `hold` keeps jobs unanswered until released;
    `stuck` takes no bytes (a service that does not read)."""

    def __init__(self, *, hold: bool = False, stuck: bool = False) -> None:
        self.hold = hold
        self.stuck = stuck
        self.status: AnalystStatus | None = READY
        self.sent: list[tuple[Exchange, int, bool]] = []
        self.sent_at: list[float] = []  # time.monotonic() of each send
        self.payloads: list[tuple[object, object]] = []
        self._waiting: list[int] = []
        self._answers: list[Findings] = []
        self.broken: str | None = None
        self.closed = False
        self._out = 0
        self._wake_r, self._wake_w = os.pipe()

    @property
    def unsent(self) -> int:
        return self._out

    def send(self, exchange: Exchange, seq: int, behind: bool) -> None:
        self.sent.append((exchange, seq, behind))
        self.sent_at.append(time.monotonic())
        self.payloads.append((exchange.request, exchange.response))
        if self.stuck:  # what the service does not take stays in this process, as bytes
            self._out += (exchange.request_chars or 0) + (exchange.response_chars or 0)
        if self.hold or self.stuck:
            self._waiting.append(seq)
        else:  # answered: readable, as a service's socket would be
            self._answers.append(Findings(seq, "server", "t"))
            os.write(self._wake_w, b"x")

    def release(self) -> None:
        self._answers.extend(Findings(seq, "server", "t") for seq in self._waiting)
        self._waiting.clear()
        self.hold = False
        os.write(self._wake_w, b"x")

    def breaks(self, reason: str = "killed") -> None:
        self.broken = reason
        os.write(self._wake_w, b"x")

    def flush(self) -> None:
        return None

    def receive(self) -> list[Findings]:
        if self.broken:
            raise LinkClosed(self.broken)
        while True:
            try:
                os.set_blocking(self._wake_r, False)
                if not os.read(self._wake_r, 64):
                    break
            except BlockingIOError:
                break
        answers, self._answers = self._answers, []
        return answers

    def fileno(self) -> int:
        return self._wake_r

    def close(self) -> None:
        self.closed = True


class Sink:
    def __init__(self) -> None:
        self.recorded: list[tuple[Exchange, Findings]] = []
        self.estimated: list[tuple[Exchange, str]] = []
        self.late: list[Exchange] = []
        self.lock = threading.Lock()
        self.fail_records = False

    def record(self, exchange: Exchange, findings: Findings, send_s: float) -> None:
        if self.fail_records:
            raise RuntimeError("a recorder bug")
        with self.lock:
            self.recorded.append((exchange, findings))

    def estimate(self, exchange: Exchange, reason: str) -> None:
        with self.lock:
            self.estimated.append((exchange, reason))

    def end_span_late(self, exchange: Exchange) -> None:
        with self.lock:
            self.late.append(exchange)
        exchange.span = None

    @property
    def reasons(self) -> list[str]:
        return [reason for _, reason in self.estimated]

    def handled(self) -> int:
        with self.lock:
            return len(self.recorded) + len(self.estimated)


def make_worker(
    links: list[ScriptedLink] | Callable[..., Any],
    sink: Sink,
    settings: Settings | None = None,
    options: Options | None = None,
) -> AnalysisWorker:
    if isinstance(links, list):
        pool = list(links)

        def factory(
            settings: Settings, options: Options, mode: str, pause: Callable[[], None]
        ) -> ScriptedLink:
            link = pool.pop(0) if pool else ScriptedLink()
            if link not in links:
                links.append(link)
            return link

        link_factory: Callable[..., Any] = factory
    else:
        link_factory = links
    return AnalysisWorker(
        settings or Settings(), sink, options=options or Options(), link_factory=link_factory
    )


def exchange(text: str = "x", *, span: Any = None) -> Exchange:
    item = Exchange(Side.SERVER, "tools/call", target="t", span=span, end_span=span is not None)
    item.request = {"name": "t", "arguments": {}}
    item.finish({"content": [{"type": "text", "text": text}]})
    return item


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def analysis_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "mcp-tokens-analysis"]


def test_nothing_starts_before_the_first_exchange() -> None:
    links: list[ScriptedLink] = []
    sink = Sink()
    worker = make_worker(links, sink)
    before = len(analysis_threads())
    time.sleep(0.05)
    assert links == [] and len(analysis_threads()) == before
    worker.submit(exchange())
    assert worker.force_flush(5)
    assert len(links) == 1 and len(sink.recorded) == 1
    worker.shutdown()


@pytest.mark.skipif(not Path("/proc/self/comm").exists(), reason="kernel names are read from /proc (Linux)")
def test_top_shows_the_analysis_thread_by_name() -> None:
    worker = make_worker([ScriptedLink()], Sink())
    worker.submit(exchange())
    assert worker.force_flush(5)
    thread = worker._thread
    assert thread is not None and thread.native_id is not None
    comm = Path(f"/proc/self/task/{thread.native_id}/comm").read_text().strip()
    worker.shutdown()
    assert comm == "mcp-tokens"
    assert Path("/proc/self/comm").read_text().strip() != "mcp-tokens"  # the application keeps its name


def test_findings_are_recorded_in_order_and_force_flush_waits_for_them() -> None:
    link = ScriptedLink(hold=True)
    sink = Sink()
    worker = make_worker([link], sink)
    items = [exchange(str(i)) for i in range(5)]
    for item in items:
        worker.submit(item)
    assert not worker.force_flush(0.2)  # held by the service
    link.release()
    assert worker.force_flush(5)
    assert [item for item, _ in sink.recorded] == items and sink.estimated == []
    worker.shutdown()


def test_a_round_that_a_call_wakes_waits_linger_s_and_takes_the_call_s_other_exchanges() -> None:
    # The call that handed over the first exchange is usually still running: the worker
    # leaves it the GIL for linger_s, and what the call hands over meanwhile joins the round.
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink, options=Options(linger_s=0.2))
    worker.submit(exchange("first"))
    assert worker.force_flush(5)
    time.sleep(0.3)  # asleep, its last round long past
    woken_at = time.monotonic()
    worker.submit(exchange("server side"))
    time.sleep(0.05)
    worker.submit(exchange("client side"))
    assert worker.force_flush(5)
    assert len(link.sent_at) == 3
    assert min(link.sent_at[1:]) >= woken_at + 0.2
    worker.shutdown()


def _busy(seconds: float) -> None:
    """Hold the GIL, as a call computing on the event loop's thread does."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        pass


def _asleep_after_a_round(worker: AnalysisWorker) -> None:
    worker.submit(exchange("first"))
    assert worker.force_flush(5)
    assert wait_for(lambda: worker._asleep)


def test_a_call_on_an_event_loop_keeps_the_gil_and_the_loop_wakes_the_thread_after_it() -> None:
    # Woken at once, the thread would take the GIL from the call within a switch interval
    # (5 ms) to start its linger; the loop's wake-up comes when the call yields.
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink, options=Options(linger_s=0.05))
    _asleep_after_a_round(worker)

    async def call() -> tuple[int, float, float]:
        worker.submit(exchange("server side"))
        handed_at = time.monotonic()
        _busy(0.3)  # well past linger_s, without yielding to the loop
        sent_while_busy = len(link.sent)
        yielded_at = time.monotonic()
        while len(link.sent) < 2 and time.monotonic() < yielded_at + 5:
            await asyncio.sleep(0.005)
        return sent_while_busy, handed_at, yielded_at

    sent_while_busy, handed_at, yielded_at = asyncio.run(call())
    assert sent_while_busy == 1  # only the first round's
    assert link.sent_at[1] >= yielded_at >= handed_at + 0.3
    assert worker.force_flush(5) and len(sink.recorded) == 2
    worker.shutdown()


def test_a_loop_that_stops_before_its_wake_up_still_has_the_exchange_counted_within_span_wait() -> None:
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink, Settings(span_wait=0.3), Options(linger_s=0.05))
    _asleep_after_a_round(worker)

    async def last_call() -> None:
        worker.submit(exchange("the last call"))

    handed_at = time.monotonic()
    asyncio.run(last_call())  # the loop closes with the wake-up it owes still pending
    assert wait_for(lambda: len(link.sent) == 2)
    assert link.sent_at[1] - handed_at < 0.3 + 0.7  # SPAN_WAIT, and a busy machine's delay
    worker.shutdown()


def test_a_thread_idle_past_its_watch_is_woken_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Idle long enough, the thread sleeps without a timeout (no wake-ups in an idle
    # process), so no event loop is trusted with its wake-up: the next exchange wakes it.
    monkeypatch.setattr(worker_module, "_WATCHFUL_S", 0.1)
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink, Settings(span_wait=0.05), Options(linger_s=0.05))
    _asleep_after_a_round(worker)
    time.sleep(0.5)  # past the watch: it sleeps without a timeout now

    async def call() -> int:
        worker.submit(exchange("after a long pause"))
        _busy(0.5)
        return len(link.sent)

    assert asyncio.run(call()) == 2
    worker.shutdown()


def test_a_round_shorter_than_a_gil_slice_does_not_let_go_of_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each hand-over of the GIL costs the event loop a switch; the slice counts from when
    # the thread took the GIL back after sleeping, not from its last hand-over.
    yields: list[float] = []

    class CountingTime:
        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

        @staticmethod
        def sleep(seconds: float) -> None:
            if seconds == Options().slice_s / 5:
                yields.append(seconds)
            time.sleep(seconds)

    monkeypatch.setattr(worker_module, "time", CountingTime())
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink)
    for round_index in range(3):
        worker.submit(exchange(str(round_index)))
        assert worker.force_flush(5)
        time.sleep(0.05)
    assert len(sink.recorded) == 3
    assert yields == []
    worker.shutdown()


def test_the_service_gets_the_payloads_and_this_process_lets_go_of_them() -> None:
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink)
    item = exchange("payload")
    request, response = item.request, item.response
    worker.submit(item)
    assert worker.force_flush(5)
    assert link.payloads == [(request, response)]
    assert item.request is None and item.response is None
    assert item.response_chars == len("payload") + len("text")  # what an estimate would start from
    worker.shutdown()


def test_the_thread_reads_the_link_only_when_its_socket_has_something() -> None:
    # Each read releases the GIL, a hand-over while the application wants it: rounds woken
    # by an exchange, with nothing come back, leave the link's socket alone.
    link = ScriptedLink(hold=True)
    reads = []
    receive = link.receive
    link.receive = lambda: reads.append(1) or receive()  # type: ignore[method-assign]
    sink = Sink()
    worker = make_worker([link], sink)
    worker.submit(exchange())
    assert wait_for(lambda: len(link.sent) == 1)
    assert wait_for(lambda: worker._asleep and not worker._queued)
    before = len(reads)
    for count in (2, 3, 4):
        worker.submit(exchange())
        assert wait_for(lambda count=count: len(link.sent) == count)  # type: ignore[misc]
        assert wait_for(lambda: worker._asleep and not worker._queued)
    assert len(reads) == before
    link.release()
    assert worker.force_flush(5) and len(sink.recorded) == 4
    assert len(reads) > before
    worker.shutdown()


def test_a_full_queue_estimates_at_once_instead_of_blocking() -> None:
    link = ScriptedLink(hold=True)
    sink = Sink()
    worker = make_worker([link], sink, Settings(queue_size=3))
    started = time.perf_counter()
    for _ in range(10):
        worker.submit(exchange())
    assert time.perf_counter() - started < 1.0
    assert sink.reasons == [semconv.SKIP_OVERLOAD] * 7  # counted nonetheless, from their length
    link.release()
    assert worker.force_flush(5) and len(sink.recorded) == 3
    worker.shutdown()


def test_what_the_process_holds_is_bounded_by_characters() -> None:
    link = ScriptedLink(stuck=True)
    sink = Sink()
    worker = make_worker([link], sink, options=Options(queue_chars=250))
    for _ in range(5):
        worker.submit(exchange("y" * 96))  # 101 characters each, with the block's type and name
        time.sleep(0.05)
    assert len(link.sent) == 2  # queued or unsent, two are all 250 characters hold
    assert sink.reasons == [semconv.SKIP_OVERLOAD] * 3
    worker.shutdown(0.1)


class WatchedResult(Mapping[str, Any]):
    """A tool result that notes which thread reads it (weighing walks it), or fails to be read."""

    def __init__(self, text: str, *, broken: bool = False) -> None:
        self._items = {"content": [{"type": "text", "text": text}]}
        self.broken = broken
        self.read_by: list[str] = []

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        self.read_by.append(threading.current_thread().name)
        if self.broken:
            raise RuntimeError("a hostile mapping")
        return len(self._items)


def test_the_caller_leaves_weighing_to_the_worker_for_a_bounded_number_of_exchanges() -> None:
    linked = threading.Event()

    def slow_link(*_: Any) -> ScriptedLink:
        linked.wait(5)  # the service is starting: nothing leaves the queue meanwhile
        return ScriptedLink()

    sink = Sink()
    worker = make_worker(slow_link, sink)
    results = [WatchedResult("y" * 10) for _ in range(_UNWEIGHED + 2)]
    for result in results:
        item = exchange()
        item.response = result
        worker.submit(item)
    caller = threading.current_thread().name
    assert [r.read_by for r in results[_UNWEIGHED:]] == [[caller], [caller]]
    assert all(r.read_by == [] for r in results[:_UNWEIGHED])
    linked.set()
    assert worker.force_flush(5) and len(sink.recorded) == _UNWEIGHED + 2
    assert all(r.read_by == ["mcp-tokens-analysis"] for r in results[:_UNWEIGHED])
    assert all(item.response_chars == 10 + len("text") for item, _ in sink.recorded)
    worker.shutdown()


def test_a_payload_that_cannot_be_weighed_is_still_handed_over() -> None:
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink)
    item = exchange()
    item.response = WatchedResult("y", broken=True)
    worker.submit(item)
    worker.submit(exchange("next"))
    assert worker.force_flush(5) and len(sink.recorded) == 2
    assert item.response_chars is None and sink.estimated == []
    worker.shutdown()


def test_from_half_the_characters_held_the_service_is_told_to_estimate() -> None:
    link = ScriptedLink(stuck=True)  # takes no bytes: what was sent stays in this process
    sink = Sink()
    worker = make_worker([link], sink, options=Options(queue_chars=4000))
    for sent in range(1, 5):
        worker.submit(exchange("y" * 995))  # 1000 characters with the block's type and name
        assert wait_for(lambda sent=sent: len(link.sent) == sent)  # type: ignore[misc]
    assert [behind for _, _, behind in link.sent] == [False, True, True, True]
    worker.shutdown(0.1)


def test_a_service_that_takes_nothing_fills_the_queue_and_later_exchanges_are_estimated() -> None:
    link = ScriptedLink(stuck=True)
    sink = Sink()
    worker = make_worker([link], sink, options=Options(queue_chars=3500))
    for _ in range(10):
        worker.submit(exchange("y" * 995))
        time.sleep(0.02)
    assert sink.reasons.count(semconv.SKIP_OVERLOAD) >= 6
    worker.shutdown(0.1)
    assert sink.handled() == 10  # the rest at shutdown: nothing lost
    assert set(sink.reasons) == {semconv.SKIP_OVERLOAD, semconv.SKIP_SHUTDOWN}


def test_a_failing_recorder_does_not_stop_the_worker() -> None:
    sink = Sink()
    sink.fail_records = True
    worker = make_worker([ScriptedLink()], sink)
    worker.submit(exchange())
    assert worker.force_flush(5)
    sink.fail_records = False
    worker.submit(exchange())
    assert worker.force_flush(5) and len(sink.recorded) == 1
    worker.shutdown()


def test_a_lost_service_has_what_it_held_estimated_and_a_new_one_starts_at_once() -> None:
    first, second = ScriptedLink(hold=True), ScriptedLink()
    links = [first, second]
    sink = Sink()
    worker = make_worker(links, sink)
    held = [exchange() for _ in range(3)]
    for item in held:
        worker.submit(item)
    assert wait_for(lambda: len(first.sent) == 3)
    first.breaks("the counting service closed the connection")
    assert wait_for(lambda: len(sink.estimated) == 3)
    assert sink.reasons == [semconv.SKIP_ERROR] * 3 and first.closed
    later = exchange()
    worker.submit(later)
    assert worker.force_flush(5)
    assert sink.recorded[-1][0] is later and second.sent[0][0] is later
    worker.shutdown()


def test_restarts_back_off_after_the_first() -> None:
    attempts: list[float] = []
    first = ScriptedLink(hold=True)

    def failing(settings: Settings, options: Options, mode: str, pause: Callable[[], None]) -> ScriptedLink:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            return first
        raise OSError("cannot start")

    sink = Sink()
    worker = make_worker(failing, sink)
    worker.submit(exchange())
    assert wait_for(lambda: len(first.sent) == 1)
    first.breaks()
    assert wait_for(lambda: len(attempts) == 3, timeout=5)
    assert attempts[1] - attempts[0] < 0.5  # at once
    assert attempts[2] - attempts[1] >= 0.9  # then after a pause
    assert worker.mode == "process"  # it once ran: not replaced by a thread
    worker.shutdown(0.1)


def test_no_service_at_all_means_counting_on_a_thread(caplog: pytest.LogCaptureFixture) -> None:
    modes: list[str] = []

    def factory(settings: Settings, options: Options, mode: str, pause: Callable[[], None]) -> ScriptedLink:
        modes.append(mode)
        if mode == "process":
            raise OSError("read-only file system")
        return ScriptedLink()

    sink = Sink()
    worker = make_worker(factory, sink)
    worker.submit(exchange())
    worker.submit(exchange())
    assert worker.force_flush(5)
    assert modes == ["process", ANALYSIS_THREAD] and worker.mode == ANALYSIS_THREAD
    assert len(sink.recorded) == 2
    assert [r.getMessage() for r in caplog.records].count(
        "mcp-tokens: no counting service (read-only file system); counting on a thread instead"
    ) == 1
    worker.shutdown()


class _Span:
    def __init__(self) -> None:
        self.ended = False


def test_a_span_waits_at_most_span_wait_and_its_exact_count_still_comes() -> None:
    link = ScriptedLink(hold=True)
    sink = Sink()
    worker = make_worker([link], sink, Settings(span_wait=0.2))
    item = exchange(span=_Span())
    started = time.monotonic()
    worker.submit(item)
    assert wait_for(lambda: sink.late == [item])
    assert 0.15 <= time.monotonic() - started < 1.0
    assert sink.handled() == 0  # the metrics still wait for the count
    link.release()
    assert worker.force_flush(5) and sink.recorded[0][0] is item and sink.late == [item]
    worker.shutdown()


def test_a_late_span_of_an_exchange_still_queued_leaves_the_bounds_true() -> None:
    # The service takes longer to start than SPAN_WAIT: the span ends (weighing its
    # exchange for the estimate) while the exchange waits in the queue, unweighed.
    linked = threading.Event()

    def slow_link(*_: Any) -> ScriptedLink:
        linked.wait(5)
        return ScriptedLink()

    sink = Sink()
    worker = make_worker(slow_link, sink, Settings(span_wait=0.05))
    items = [exchange("y" * 50, span=_Span()) for _ in range(3)]
    for item in items:
        worker.submit(item)
    time.sleep(0.1)
    linked.set()
    assert worker.force_flush(5) and [item for item, _ in sink.recorded] == items
    assert sink.late == items
    # Nothing is held any more, and nothing counts as waiting to be weighed.
    assert worker._held_chars == 0 and worker._unweighed == 0
    worker.shutdown()


def test_a_span_answered_in_time_is_not_ended_early() -> None:
    sink = Sink()
    worker = make_worker([ScriptedLink()], sink, Settings(span_wait=0.1))
    item = exchange(span=_Span())
    worker.submit(item)
    assert worker.force_flush(5)
    item.span = None  # what the pipeline does when it records
    time.sleep(0.2)
    assert sink.late == []
    worker.shutdown()


def test_an_exchange_whose_span_ended_is_let_go_of_before_its_deadline() -> None:
    # What the worker holds is what is in flight: a span's deadline does not keep the
    # exchange (and what it references) alive once it has been recorded or estimated.
    sink = Sink()
    worker = make_worker([ScriptedLink()], sink, Settings(span_wait=30.0))
    with_span, without_span = exchange(span=_Span()), exchange()
    worker.submit(with_span)
    assert worker.force_flush(5)
    worker.submit(without_span)  # counted like the first, but never had a span to wait for
    assert worker.force_flush(5)
    assert [item for item, _ in sink.recorded] == [with_span, without_span]
    assert sys.getrefcount(with_span) == sys.getrefcount(without_span)
    worker.shutdown()


def test_shutdown_estimates_what_is_left_and_closes_the_link() -> None:
    link = ScriptedLink(hold=True)
    sink = Sink()
    worker = make_worker([link], sink)
    for _ in range(3):
        worker.submit(exchange())
    assert wait_for(lambda: len(link.sent) == 3)
    worker.shutdown(0.1)
    assert sink.reasons == [semconv.SKIP_SHUTDOWN] * 3 and link.closed
    worker.submit(exchange())
    assert sink.reasons[-1] == semconv.SKIP_OVERLOAD


def test_an_exchange_is_estimated_when_no_thread_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    sink = Sink()
    worker = make_worker([ScriptedLink()], sink)
    worker.submit(exchange("payload"))
    assert sink.reasons == [semconv.SKIP_OVERLOAD]
    assert sink.estimated[0][0].response_chars == len("payload") + len("text")  # estimated from it


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_starts_its_own_worker() -> None:
    sink = Sink()
    links: list[ScriptedLink] = []
    worker = make_worker(links, sink)
    worker.submit(exchange())
    assert worker.force_flush(5)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is gone, its link forgotten
        try:
            worker.submit(exchange())
            ok = worker.force_flush(5) and len(links) == 2 and links[0].closed and len(sink.recorded) == 2
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.waitpid(pid, 0)
    assert not links[0].closed  # the parent's own link goes on
    worker.shutdown()


def test_a_wake_up_that_fails_on_the_loop_stays_out_of_the_application_s_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link = ScriptedLink()
    sink = Sink()
    worker = make_worker([link], sink, options=Options(linger_s=0.01))
    _asleep_after_a_round(worker)
    handler_calls: list[dict[str, Any]] = []

    def failing_wake(*, now: bool = False) -> None:
        raise RuntimeError("a bug of ours")

    async def call() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: handler_calls.append(context))
        worker.submit(exchange("second"))
        monkeypatch.setattr(worker, "_start_or_wake", failing_wake)
        await asyncio.sleep(0.1)  # the loop runs the wake-up it owes

    asyncio.run(call())
    assert handler_calls == []
    monkeypatch.undo()
    assert worker.force_flush(5) and len(sink.recorded) == 2
    worker.shutdown()
