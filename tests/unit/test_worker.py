# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumented process's side of the analysis (worker.py), against a scripted link.

The link stands in for the analysis: it answers jobs as a test tells it to, can hold them,
break, fill up, or fail to start. What is checked is the worker's contract: start nothing
before the first exchange, never block or raise on the caller's path, keep the queue
bounded, hand every exchange to exactly one of on_findings / on_skip, wait for calls in
flight, survive a lost helper, stop cleanly.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.analyst import AnalystStatus, Findings
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.inflight import IN_FLIGHT
from opentelemetry.instrumentation.mcp_tokens.link import LinkClosed
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing
from opentelemetry.instrumentation.mcp_tokens.worker import AnalysisWorker

READY = AnalystStatus("o200k_base", True, None, 1)


class ScriptedLink:
    """A link whose answers the test controls: `hold` keeps jobs unanswered until released."""

    def __init__(self, *, started: bool = True, hold: bool = False) -> None:
        self.full = False  # a pipe that takes nothing (a helper that does not read)
        self.sent: list[tuple[Exchange, int, bool]] = []
        self.payloads: list[tuple[object, object]] = []
        self._answers: deque[Findings] = deque()
        self._held: list[Findings] = []
        self.hold = hold
        self.broken = False
        self.closed = False
        self.status: AnalystStatus | None = READY if started else None
        self._lock = threading.Lock()

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[bool]:
        if self.broken:
            raise LinkClosed("scripted: broken")
        while self.full:
            yield False
        with self._lock:
            self.sent.append((exchange, seq, behind))
            self.payloads.append((exchange.request, exchange.response))
            answer = Findings(seq, "server", exchange.target or "")
            (self._held if self.hold else self._answers).append(answer)
        yield True

    @property
    def targets(self) -> list[str | None]:
        return [exchange.target for exchange, _, _ in self.sent]

    def release(self) -> None:
        with self._lock:
            self._answers.extend(self._held)
            self._held.clear()

    def receive(self) -> list[Findings]:
        if self.broken:
            raise LinkClosed("scripted: broken")
        with self._lock:
            answers = list(self._answers)
            self._answers.clear()
        return answers

    def flush(self) -> bool:
        return not self.full

    def wait(self, timeout: float) -> None:
        time.sleep(min(timeout, 0.001))

    def close(self, timeout: float = 2.0) -> None:
        self.closed = True

    def forget(self) -> None:
        self.closed = True


class Recorded:
    def __init__(self) -> None:
        self.findings: list[tuple[Exchange, Findings]] = []
        self.skipped: list[tuple[Exchange, str]] = []
        self.lock = threading.Lock()

    def on_findings(self, exchange: Exchange, findings: Findings, send_s: float) -> None:
        with self.lock:
            self.findings.append((exchange, findings))

    def on_skip(self, exchange: Exchange, reason: str) -> None:
        with self.lock:
            self.skipped.append((exchange, reason))

    @property
    def reasons(self) -> list[str]:
        return [reason for _, reason in self.skipped]


LinkFactory = Callable[[Settings, Pacing, str], Any]


def make_worker(
    links: list[ScriptedLink] | LinkFactory,
    recorded: Recorded,
    settings: Settings | None = None,
    pacing: Pacing | None = None,
) -> AnalysisWorker:
    if isinstance(links, list):
        pool = list(links)

        def factory(settings: Settings, pacing: Pacing, mode: str) -> ScriptedLink:
            link = pool.pop(0) if pool else ScriptedLink()
            if link not in links:
                links.append(link)
            return link

        link_factory: LinkFactory = factory
    else:
        link_factory = links
    return AnalysisWorker(
        settings or Settings(),
        recorded.on_findings,
        recorded.on_skip,
        pacing=pacing or Pacing(),
        link_factory=link_factory,
    )


def exchange(method: str = "tools/call", text: str = "x", target: str | None = "t") -> Exchange:
    item = Exchange(Side.SERVER, method, target=target)
    item.finish({"content": [{"type": "text", "text": text}]})
    return item


def old_exchange(ended_ago_s: float, text: str = "x") -> Exchange:
    item = exchange(text=text)
    item.end_ns -= int(ended_ago_s * 1e9)
    return item


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


@contextlib.contextmanager
def call_in_flight(target: str = "busy") -> Iterator[Exchange]:
    """An MCP operation of this process that is in flight until the block ends."""
    call = Exchange(Side.CLIENT, "tools/call", target=target)
    try:
        yield call
    finally:
        call.finish(None)


def analysis_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "mcp-tokens-analysis"]


def test_nothing_starts_before_the_first_exchange() -> None:
    recorded, opened = Recorded(), []

    def factory(settings: Settings, pacing: Pacing, mode: str) -> ScriptedLink:
        opened.append(ScriptedLink())
        return opened[-1]

    before = len(analysis_threads())
    worker = make_worker(factory, recorded)
    try:
        time.sleep(0.05)
        assert opened == [] and len(analysis_threads()) == before
        assert worker.force_flush(1)  # nothing to wait for
        worker.submit(exchange())
        assert worker.force_flush(5)
        assert len(opened) == 1 and len(recorded.findings) == 1
        assert len(analysis_threads()) == before + 1
    finally:
        worker.shutdown()
    assert opened[0].closed
    assert wait_for(lambda: len(analysis_threads()) == before)


def test_findings_come_back_in_order_and_force_flush_waits_for_them() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    try:
        assert worker.wait_ready(5)
        items = [exchange(target=name) for name in ("a", "b", "c")]
        for item in items:
            worker.submit(item)
        assert worker.force_flush(5)
        assert [item for item, _ in recorded.findings] == items
        assert link.targets == ["a", "b", "c"]
        assert [seq for _, seq, _ in link.sent] == sorted({seq for _, seq, _ in link.sent})
    finally:
        worker.shutdown()


def test_the_analysis_gets_the_payloads_and_this_process_lets_go_of_them() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    try:
        item = Exchange(Side.CLIENT, "tools/call", target="t")
        item.request = {"name": "t", "arguments": {"q": 1}}
        item.finish({"content": [{"type": "text", "text": "hello"}]})
        worker.submit(item)
        assert worker.force_flush(5)
        assert link.payloads == [
            ({"name": "t", "arguments": {"q": 1}}, {"content": [{"type": "text", "text": "hello"}]})
        ]
        assert item.request is None and item.response is None
    finally:
        worker.shutdown()


def test_a_full_queue_skips_instead_of_blocking() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, Settings(queue_size=2))
    try:
        assert worker.wait_ready(5)
        for _ in range(6):
            worker.submit(exchange())
        assert recorded.reasons == [semconv.SKIP_OVERLOAD] * 4
        assert wait_for(lambda: len(link.sent) == 2)
        link.release()
        assert wait_for(lambda: len(recorded.findings) == 2)
        link.hold = False
        assert worker.force_flush(5)
    finally:
        worker.shutdown()


def test_the_queue_is_bounded_by_the_characters_it_holds() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, pacing=Pacing(queue_chars=1000))
    try:
        worker.submit(exchange(text="y" * 900))
        worker.submit(exchange(text="y" * 900))  # would hold 1800 characters
        assert recorded.reasons == [semconv.SKIP_OVERLOAD]
        assert wait_for(lambda: len(link.sent) == 1)
        link.hold = False
        link.release()
        assert worker.force_flush(5)
        worker.submit(exchange(text="y" * 900))  # the first one's characters were released
        assert worker.force_flush(5) and len(recorded.skipped) == 1
    finally:
        worker.shutdown()


def test_half_the_characters_queued_tells_the_analysis_it_is_behind() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, pacing=Pacing(queue_chars=5000))
    try:
        for count in (1, 2, 3):  # about 1000, 2000, 3000 characters in analysis
            worker.submit(exchange(text="y" * 1000))
            assert wait_for(lambda count=count: len(link.sent) == count)  # type: ignore[misc]
        assert [behind for _, _, behind in link.sent] == [False, False, True]
        link.hold = False
        link.release()
        assert worker.force_flush(5)
    finally:
        worker.shutdown()


def test_a_helper_that_stops_reading_fills_the_queue_and_later_exchanges_are_dropped() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, Settings(queue_size=10))
    try:
        assert worker.wait_ready(5)
        link.full = True
        for _ in range(25):
            worker.submit(old_exchange(5.0))
        assert recorded.reasons == [semconv.SKIP_OVERLOAD] * 15
        time.sleep(0.2)
        assert recorded.findings == []
        link.full = False  # it reads again: what the queue held is analysed
        assert worker.force_flush(5)
        assert len(recorded.findings) == 10 and len(recorded.skipped) == 15
    finally:
        link.full = False
        worker.shutdown()


def test_a_failing_recorder_does_not_stop_the_worker() -> None:
    recorded, link = Recorded(), ScriptedLink()

    def on_findings(item: Exchange, findings: Findings, send_s: float) -> None:
        if item.target == "bad":
            raise RuntimeError("ours")
        recorded.on_findings(item, findings, send_s)

    worker = AnalysisWorker(Settings(), on_findings, recorded.on_skip, link_factory=lambda s, p, m: link)
    try:
        worker.submit(exchange(target="bad"))
        worker.submit(exchange(target="good"))
        assert worker.force_flush(5)
        assert [item.target for item, _ in recorded.findings] == ["good"]
    finally:
        worker.shutdown()


def test_a_lost_helper_skips_what_it_held_and_a_new_one_takes_over() -> None:
    recorded = Recorded()
    first, second = ScriptedLink(hold=True), ScriptedLink()
    worker = make_worker([first, second], recorded, pacing=Pacing(restart_pause_s=0.05))
    try:
        for _ in range(3):
            worker.submit(exchange(target="held"))
        assert wait_for(lambda: len(first.sent) == 3)
        first.broken = True
        assert wait_for(lambda: len(recorded.skipped) == 3)
        assert set(recorded.reasons) == {semconv.SKIP_ERROR}
        assert first.closed
        later = exchange(target="later")
        worker.submit(later)
        assert worker.force_flush(5)
        assert [item for item, _ in recorded.findings] == [later]
        assert second.targets == ["later"]
    finally:
        worker.shutdown()


def test_restarts_back_off_doubling_up_to_a_bound() -> None:
    pacing = Pacing(restart_pause_s=1.0, max_restart_pause_s=6.0)
    assert [pacing.restart_pause(n) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 6.0, 6.0]


def test_a_helper_that_cannot_start_is_replaced_by_the_analysis_on_a_thread() -> None:
    recorded, modes = Recorded(), []
    thread_link = ScriptedLink()

    def factory(settings: Settings, pacing: Pacing, mode: str) -> ScriptedLink:
        modes.append(mode)
        if mode == "process":
            raise OSError("no interpreter")
        return thread_link

    worker = make_worker(factory, recorded)
    try:
        worker.submit(exchange())
        assert worker.force_flush(5)
        assert modes == ["process", "thread"] and worker.mode == "thread"
        assert len(recorded.findings) == 1
    finally:
        worker.shutdown()


def test_a_helper_that_dies_before_it_is_ready_is_replaced_by_the_thread() -> None:
    recorded, modes = Recorded(), []
    dying, thread_link = ScriptedLink(started=False), ScriptedLink()
    dying.broken = True

    def factory(settings: Settings, pacing: Pacing, mode: str) -> ScriptedLink:
        modes.append(mode)
        return dying if mode == "process" else thread_link

    worker = make_worker(factory, recorded)
    try:
        assert worker.wait_ready(5)
        assert modes == ["process", "thread"]
    finally:
        worker.shutdown()


def test_findings_that_never_come_back_are_given_up() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, pacing=Pacing(answer_within_s=0.1))
    try:
        item = exchange()
        worker.submit(item)
        assert worker.force_flush(5)
        assert recorded.skipped == [(item, semconv.SKIP_OVERLOAD)]
        link.release()  # a late answer is ignored
        time.sleep(0.05)
        assert recorded.findings == []
    finally:
        worker.shutdown()


def test_shutdown_skips_what_is_left_and_closes_the_link() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded)
    for _ in range(3):
        worker.submit(exchange())
    worker.shutdown(timeout=0.2)
    assert len(recorded.skipped) == 3
    assert set(recorded.reasons) == {semconv.SKIP_SHUTDOWN}
    assert link.closed
    worker.submit(exchange())  # after shutdown: skipped, never an exception
    assert len(recorded.skipped) == 4


def test_a_burst_is_sent_in_a_few_rounds_not_one_wake_up_per_exchange() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    rounds: list[float] = []
    real_round = worker._round

    def counting_round(started: float) -> None:
        rounds.append(started)
        real_round(started)

    worker._round = counting_round  # type: ignore[method-assign]
    try:
        assert worker.wait_ready(5)
        assert worker.force_flush(5)
        rounds.clear()
        for _ in range(100):
            worker.submit(exchange())
        assert worker.force_flush(5)
        assert len(recorded.findings) == 100
        assert len(rounds) <= 10
    finally:
        worker.shutdown()


def test_rounds_under_sustained_load_are_sparse_and_follow_the_cpu_they_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pacing = Pacing()
    link = ScriptedLink()
    worker = make_worker([link], Recorded(), pacing=pacing)
    worker._link = link  # type: ignore[assignment]
    slept: list[float] = []

    def first_pause(used: float) -> float:
        slept.clear()
        worker._pause_before_round(used)
        return slept[0]

    monkeypatch.setattr(time, "sleep", slept.append)
    assert first_pause(0.0) == pacing.round_s  # nothing in hand: quiet-time rounds
    worker._queue.append((old_exchange(2 * pacing.max_lag_s), 1))  # held longer than it may wait
    with call_in_flight():
        assert first_pause(0.0) == pacing.busy_round_s
        assert first_pause(0.01) == pytest.approx(pacing.busy_ratio * 0.01)
    assert wait_for(lambda: not IN_FLIGHT.busy())  # the call's response path settled
    assert first_pause(0.0) == pacing.round_s  # a backlog without calls: the quiet pace


def test_work_waits_for_the_calls_in_flight_within_its_lag_budget() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    try:
        assert worker.wait_ready(5)
        with call_in_flight("slow"):
            worker.submit(exchange(target="done"))
            time.sleep(0.2)
            assert recorded.findings == [], "the worker took the GIL while a call was in flight"
        assert worker.force_flush(5) and [item.target for item, _ in recorded.findings] == ["done"]
    finally:
        worker.shutdown()
    # A call that goes on past the budget no longer holds the analysis back.
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, pacing=Pacing(max_lag_s=0.1))
    try:
        with call_in_flight("endless"):
            worker.submit(exchange(target="late"))
            assert worker.force_flush(5)
        assert [item.target for item, _ in recorded.findings] == ["late"]
    finally:
        worker.shutdown()


def test_a_round_waits_for_a_large_response_path_to_settle() -> None:
    pacing = Pacing()
    link = ScriptedLink()
    worker = make_worker([link], Recorded(), pacing=pacing)
    worker._link = link  # type: ignore[assignment]
    worker.submit(exchange(text="z" * 1_000_000))  # starts the thread; the round below is ours
    started = time.monotonic()
    worker._pause_before_round(0.0)
    assert time.monotonic() - started >= 0.9 * pacing.settle_seconds(1_000_000)
    worker.shutdown()


def test_only_a_response_that_still_crosses_a_transport_settles_at_transport_pace() -> None:
    pacing, megabyte = Pacing(), 1 << 20
    answered = Exchange(Side.SERVER, "tools/call", response={})
    received = Exchange(Side.CLIENT, "tools/call", response={})
    # A server's own request (sampling) is received by it; a client's answer to one leaves.
    sampling = "sampling/createMessage"
    sampling_sent = Exchange(Side.SERVER, sampling, response={}, operation_side=Side.CLIENT)
    sampling_answered = Exchange(Side.CLIENT, sampling, response={}, operation_side=Side.SERVER)
    in_memory = Exchange(Side.SERVER, "tools/call", response={}, in_process=True)
    assert answered.response_crosses_transport and sampling_answered.response_crosses_transport
    assert not received.response_crosses_transport
    assert not sampling_sent.response_crosses_transport
    assert not in_memory.response_crosses_transport
    leaving, arrived = pacing.settle_seconds(megabyte, True), pacing.settle_seconds(megabyte, False)
    assert leaving == pytest.approx(pacing.settle_s + megabyte / pacing.settle_chars_per_s)
    assert arrived == pytest.approx(pacing.settle_s + megabyte / pacing.arrived_settle_chars_per_s)
    assert arrived < leaving / 5
    assert pacing.settle_seconds(1 << 30, True) == pacing.settle_seconds(1 << 30, False)
    assert pacing.settle_seconds(1 << 30) == pacing.max_settle_s == pacing.max_lag_s


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_analysis() -> None:
    recorded = Recorded()
    parent_link = ScriptedLink()
    child_links: list[ScriptedLink] = []

    def factory(settings: Settings, pacing: Pacing, mode: str) -> ScriptedLink:
        if os.getpid() == parent:
            return parent_link
        child_links.append(ScriptedLink())
        return child_links[-1]

    parent = os.getpid()
    worker = make_worker(factory, recorded)
    try:
        assert worker.wait_ready(5)
        pid = os.fork()
        if pid == 0:  # the child: a fresh worker thread and link, the parent's left alone
            status = 1
            try:
                worker.submit(exchange(target="child"))
                if worker.force_flush(5) and [item.target for item, _ in recorded.findings] == ["child"]:
                    status = 0 if child_links else 2
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert not parent_link.closed
        worker.submit(exchange(target="parent"))
        assert worker.force_flush(5)
        assert [item.target for item, _ in recorded.findings] == ["parent"]
    finally:
        worker.shutdown()


class Marker:
    """A value whose lifetime a weak reference can watch (plain JSON values cannot be)."""

    def __str__(self) -> str:
        return "marker"


class CallStartingLink(ScriptedLink):
    """A scripted link during whose sending an MCP call starts (and stays in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.call: Exchange | None = None

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[bool]:
        yield from super().sender(exchange, seq, behind)
        self.call = Exchange(Side.CLIENT, "tools/call", target="busy")


@contextlib.contextmanager
def listing_handed_over(
    tool_count: int, pacing: Pacing | None = None
) -> Iterator[tuple[weakref.ref[Marker], CallStartingLink]]:
    """A tools/list of `tool_count` tools handed to a worker whose sending starts a call
    (left in flight); yields a weak reference to a value of the payload, once the worker
    alone may hold the payload, and the link (its `call`)."""
    recorded, link = Recorded(), CallStartingLink()
    worker = make_worker([link], recorded, pacing=pacing)
    try:
        assert worker.wait_ready(5)
        marker = Marker()
        watch = weakref.ref(marker)
        listing = Exchange(Side.CLIENT, "tools/list")
        listing.finish(
            {"tools": [{"name": f"t{i}", "inputSchema": {}} for i in range(tool_count)], "m": marker}
        )
        del marker
        worker.submit(listing)
        assert wait_for(lambda: link.call is not None and len(recorded.findings) == 1)
        link.payloads.clear()  # the scripted link's own copy
        link.sent.clear()
        del listing
        yield watch, link
    finally:
        if link.call is not None:
            link.call.finish(None)
        worker.shutdown()


def test_a_payload_of_many_values_is_freed_in_a_quiet_round() -> None:
    with listing_handed_over(5000) as (watch, link):
        time.sleep(0.2)
        assert watch() is not None, "freed while a call was in flight"
        assert link.call is not None
        link.call.finish(None)
        assert wait_for(lambda: watch() is None), "never freed"


def test_a_payload_of_few_values_is_freed_at_once() -> None:
    with listing_handed_over(1) as (watch, _):
        assert wait_for(lambda: watch() is None), "kept although freeing it is cheap"


def test_a_kept_payload_is_freed_under_sustained_load() -> None:
    with listing_handed_over(5000, Pacing(max_keep_s=0.3)) as (watch, link):
        assert wait_for(lambda: watch() is None), "kept past max_keep_s while a call was in flight"
        assert link.call is not None and not link.call.end_ns  # still in flight


def test_an_exchange_is_skipped_when_no_thread_can_start(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    real_start = threading.Thread.start

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(threading.Thread, "start", refused)
    first = exchange(target="first")
    worker.submit(first)  # never raises into the caller
    assert recorded.skipped == [(first, semconv.SKIP_OVERLOAD)]
    monkeypatch.setattr(threading.Thread, "start", real_start)
    try:
        worker.submit(exchange(target="second"))
        assert worker.force_flush(5)
        assert [item.target for item, _ in recorded.findings] == ["second"]
    finally:
        worker.shutdown()
