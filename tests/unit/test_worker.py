"""The instrumented process's side of the analysis (worker.py), against a scripted link.

The link stands in for the helper process: it answers jobs as a test tells it to, can
hold them, break, or fail to start. What is checked is the worker's contract: never
block or raise on the caller's path, keep the queue bounded, hand every exchange to
exactly one of on_findings / on_skip, survive a lost helper, stop cleanly.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens import worker as worker_module
from opentelemetry.instrumentation.mcp_tokens.analyst import AnalystStatus, Findings, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.exchange import (
    ARRIVED_SETTLE_CHARS_PER_S,
    MAX_SETTLE_S,
    SETTLE_CHARS_PER_S,
    SETTLE_S,
    Exchange,
    Side,
    settle_seconds,
)
from opentelemetry.instrumentation.mcp_tokens.helper import LinkClosed
from opentelemetry.instrumentation.mcp_tokens.worker import SLICE_S, AnalysisWorker, sliced

READY = AnalystStatus("o200k_base", True, None, 1)


class ScriptedLink:
    """A link whose answers the test controls: `hold` keeps jobs unanswered until released."""

    def __init__(self, *, started: bool = True, hold: bool = False) -> None:
        self.full = False  # a pipe that takes nothing (a helper holding all it may)
        self.jobs: list[Job] = []
        self.payloads: list[tuple[object, object]] = []
        self._answers: deque[Findings | AnalystStatus] = deque([READY] if started else [])
        self._held: list[Job] = []
        self.hold = hold
        self.broken = False
        self.closed = False
        self.started = started
        self._lock = threading.Lock()

    def sender(self, job: Job, request: object, response: object) -> Iterator[bool]:
        if self.broken:
            raise LinkClosed("scripted: broken")
        while self.full:
            yield False
        with self._lock:
            self.jobs.append(job)
            self.payloads.append((request, response))
            (self._held if self.hold else self._answers).append(findings_for(job))  # type: ignore[arg-type]
        yield True

    def release(self) -> None:
        with self._lock:
            self._answers.extend(findings_for(job) for job in self._held)  # type: ignore[misc]
            self._held.clear()

    def receive(self) -> list[Findings | AnalystStatus]:
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


def findings_for(job: Job | Findings) -> Findings:
    return job if isinstance(job, Findings) else Findings(job.seq, "server", job.target or "")


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


def make_worker(
    links: list[ScriptedLink] | Callable[[Settings, str], Any], recorded: Recorded, **kwargs: Any
) -> AnalysisWorker:
    if isinstance(links, list):
        pool = list(links)
        opened: list[ScriptedLink] = links

        def factory(settings: Settings, mode: str) -> ScriptedLink:
            link = pool.pop(0) if pool else ScriptedLink()
            if link not in opened:
                opened.append(link)
            return link

        link_factory: Callable[[Settings, str], Any] = factory
    else:
        link_factory = links
    worker = AnalysisWorker(
        Settings(), recorded.on_findings, recorded.on_skip, link_factory=link_factory, **kwargs
    )
    worker.start()
    return worker


def exchange(method: str = "tools/call", text: str = "x", target: str | None = "t") -> Exchange:
    item = Exchange(Side.SERVER, method, target=target)
    item.finish({"content": [{"type": "text", "text": text}]})
    return item


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def test_findings_come_back_in_order_and_drain_waits_for_them() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    try:
        assert worker.wait_ready(5)
        items = [exchange(target=name) for name in ("a", "b", "c")]
        for item in items:
            worker.submit(item)
        assert worker.drain(5)
        assert [item for item, _ in recorded.findings] == items
        assert [job.target for job in link.jobs] == ["a", "b", "c"]
        assert [job.seq for job in link.jobs] == sorted({job.seq for job in link.jobs})
    finally:
        worker.stop()


def test_the_analysis_gets_the_payloads_and_this_process_lets_go_of_them() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded)
    try:
        item = Exchange(Side.CLIENT, "tools/call", target="t")
        item.request = {"name": "t", "arguments": {"q": 1}}
        item.finish({"content": [{"type": "text", "text": "hello"}]})
        worker.submit(item)
        assert worker.drain(5)
        assert link.payloads == [
            ({"name": "t", "arguments": {"q": 1}}, {"content": [{"type": "text", "text": "hello"}]})
        ]
        assert item.request is None and item.response is None
        # A method with no payload a model is shown sends none.
        listing = Exchange(Side.CLIENT, "initialize")
        listing.finish({"serverInfo": {"name": "s"}})
        worker.submit(listing)
        assert worker.drain(5)
        assert link.payloads[-1] == (None, None)
    finally:
        worker.stop()


def test_a_full_queue_skips_instead_of_blocking() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, max_pending=2)
    try:
        assert worker.wait_ready(5)
        started = time.perf_counter()
        for _ in range(6):
            worker.submit(exchange())
        assert time.perf_counter() - started < 0.05, "submit never waits"
        assert [reason for _, reason in recorded.skipped] == [semconv.SKIP_OVERLOAD] * 4
        assert wait_for(lambda: len(link.jobs) == 2)
        link.release()
        assert wait_for(lambda: len(recorded.findings) == 2)
        link.hold = False
        assert worker.drain(5)
    finally:
        worker.stop()


def test_the_queue_is_bounded_by_the_characters_it_holds() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded, max_pending_chars=1000)
    try:
        worker.submit(exchange(text="y" * 900))
        worker.submit(exchange(text="y" * 900))  # would hold 1800 characters
        assert [reason for _, reason in recorded.skipped] == [semconv.SKIP_OVERLOAD]
        assert wait_for(lambda: len(link.jobs) == 1)
        link.hold = False
        link.release()
        assert worker.drain(5)
        worker.submit(exchange(text="y" * 900))  # the first one's characters were released
        assert worker.drain(5) and len(recorded.skipped) == 1
    finally:
        worker.stop()


def test_a_failing_recorder_does_not_stop_the_worker() -> None:
    recorded, link = Recorded(), ScriptedLink()

    def on_findings(item: Exchange, findings: Findings, send_s: float) -> None:
        if item.target == "bad":
            raise RuntimeError("ours")
        recorded.on_findings(item, findings, send_s)

    worker = AnalysisWorker(Settings(), on_findings, recorded.on_skip, link_factory=lambda s, m: link)
    worker.start()
    try:
        worker.submit(exchange(target="bad"))
        worker.submit(exchange(target="good"))
        assert worker.drain(5)
        assert [item.target for item, _ in recorded.findings] == ["good"]
    finally:
        worker.stop()


def test_a_lost_helper_skips_what_it_held_and_a_new_one_takes_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "RESTART_PAUSE_S", 0.05)
    recorded = Recorded()
    first, second = ScriptedLink(hold=True), ScriptedLink()
    links = [first, second]
    worker = make_worker(links, recorded)
    try:
        held = [exchange(target="held") for _ in range(3)]
        for item in held:
            worker.submit(item)
        assert wait_for(lambda: len(first.jobs) == 3)
        first.broken = True
        assert wait_for(lambda: len(recorded.skipped) == 3)
        assert {reason for _, reason in recorded.skipped} == {semconv.SKIP_ERROR}
        assert first.closed
        later = exchange(target="later")
        worker.submit(later)
        assert worker.drain(5)
        assert [item for item, _ in recorded.findings] == [later]
        assert second.jobs and second.jobs[0].target == "later"
    finally:
        worker.stop()


def test_a_helper_that_cannot_start_is_replaced_by_the_analysis_on_a_thread() -> None:
    recorded = Recorded()
    modes: list[str] = []
    thread_link = ScriptedLink()

    def factory(settings: Settings, mode: str) -> ScriptedLink:
        modes.append(mode)
        if mode == "process":
            raise OSError("no interpreter")
        return thread_link

    worker = make_worker(factory, recorded)
    try:
        worker.submit(exchange())
        assert worker.drain(5)
        assert modes == ["process", "thread"] and worker.mode == "thread"
        assert len(recorded.findings) == 1
    finally:
        worker.stop()


def test_a_helper_that_dies_before_it_is_ready_is_replaced_by_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = Recorded()
    modes: list[str] = []
    dying, thread_link = ScriptedLink(started=False), ScriptedLink()
    dying.broken = True

    def factory(settings: Settings, mode: str) -> ScriptedLink:
        modes.append(mode)
        return dying if mode == "process" else thread_link

    worker = make_worker(factory, recorded)
    try:
        assert worker.wait_ready(5)
        assert modes == ["process", "thread"]
    finally:
        worker.stop()


def test_findings_that_never_come_back_are_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "OUTSTANDING_TIMEOUT_S", 0.1)
    monkeypatch.setattr(worker_module, "EXPIRY_EVERY_S", 0.01)
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded)
    try:
        item = exchange()
        worker.submit(item)
        assert worker.drain(5)
        assert recorded.skipped == [(item, semconv.SKIP_OVERLOAD)]
        link.release()  # a late answer is ignored
        time.sleep(0.05)
        assert recorded.findings == []
    finally:
        worker.stop()


def test_stop_skips_what_is_left_and_closes_the_link() -> None:
    recorded, link = Recorded(), ScriptedLink(hold=True)
    worker = make_worker([link], recorded)
    for _ in range(3):
        worker.submit(exchange())
    worker.stop(timeout=0.2)
    assert len(recorded.skipped) == 3
    assert {reason for _, reason in recorded.skipped} == {semconv.SKIP_SHUTDOWN}
    assert link.closed
    worker.submit(exchange())  # after stop: skipped, never an exception
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
        assert worker.drain(5)
        rounds.clear()
        for _ in range(100):
            worker.submit(exchange())
        assert worker.drain(5)
        assert len(recorded.findings) == 100
        assert len(rounds) <= 10
    finally:
        worker.stop()


def old_exchange(ended_ago_s: float, text: str = "x") -> Exchange:
    item = exchange(text=text)
    item.end_ns -= int(ended_ago_s * 1e9)
    return item


def test_rounds_under_sustained_load_are_sparse_and_follow_the_cpu_they_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    link = ScriptedLink()
    worker = AnalysisWorker(Settings(), lambda *a: None, lambda *a: None, link_factory=lambda s, m: link)
    worker._link = link  # type: ignore[assignment]
    slept: list[float] = []

    def first_pause(used: float) -> float:
        slept.clear()
        worker._pause_before_round(used)
        return slept[0]

    monkeypatch.setattr(worker_module.time, "sleep", slept.append)
    assert first_pause(0.0) == worker_module.ROUND_S  # nothing in hand: quiet-time rounds
    worker.submit(old_exchange(2 * worker_module.MAX_LAG_S))  # held longer than it may wait
    assert first_pause(0.0) == worker_module.BUSY_ROUND_S
    assert first_pause(0.01) == pytest.approx(worker_module.BUSY_RATIO * 0.01)


def test_work_waits_for_the_calls_in_flight_within_its_lag_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, spare_cpu=lambda: 4.0)  # idle CPU for the helper
    try:
        assert worker.wait_ready(5)
        call = Exchange(Side.CLIENT, "tools/call", target="slow")  # a call in flight
        worker.submit(exchange(target="done"))
        time.sleep(0.2)
        assert recorded.findings == [], "the worker took the GIL while a call was in flight"
        call.finish({"content": []})
        assert worker.drain(5) and [item.target for item, _ in recorded.findings] == ["done"]
        # A call that goes on past the budget no longer holds the analysis back.
        monkeypatch.setattr(worker_module, "MAX_LAG_S", 0.1)
        endless = Exchange(Side.CLIENT, "tools/call", target="endless")
        worker.submit(exchange(target="late"))
        assert worker.drain(5)
        assert [item.target for item, _ in recorded.findings] == ["done", "late"]
        endless.finish(None)
    finally:
        worker.stop()


def test_a_round_waits_for_a_large_response_path_to_settle() -> None:
    link = ScriptedLink()
    worker = AnalysisWorker(Settings(), lambda *a: None, lambda *a: None, link_factory=lambda s, m: link)
    worker._link = link  # type: ignore[assignment]
    worker.submit(exchange(text="z" * 1_000_000))  # not started: stays queued
    started = time.monotonic()
    worker._pause_before_round(0.0)
    assert time.monotonic() - started >= 0.9 * settle_seconds(1_000_000)


def test_under_sustained_load_what_exceeds_the_helpers_share_is_held_for_a_quiet_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(worker_module, "HELPER_BANK_S", 0.01)  # banks 1 ms of CPU
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, spare_cpu=lambda: 2.1, cpus=8)  # a share of 0.1
    try:
        assert worker.wait_ready(5)
        for _ in range(60):  # the helper's cost, as it reports it: about 10 ms each
            worker._helper_cost.observe(0.01, 0)
        call = Exchange(Side.CLIENT, "tools/call", target="busy")  # calls go on and on
        for _ in range(200):
            worker.submit(old_exchange(2 * worker_module.MAX_LAG_S))
        assert worker.drain(10)
        call.finish(None)
        assert recorded.skipped == [] and len(recorded.findings) == 200
        alongside = [job for job in link.jobs if not job.hold]
        assert 1 <= len(alongside) < 100  # what the share paid for; the rest waits for quiet
        assert link.jobs[0] in alongside
    finally:
        worker.stop()


def test_without_idle_cpu_under_sustained_load_everything_is_held() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, spare_cpu=lambda: 1.6, cpus=8)  # under two idle cores
    try:
        assert worker.wait_ready(5)
        worker._helper_cost.observe(0.0005, 0)
        call = Exchange(Side.CLIENT, "tools/call", target="busy")
        for _ in range(200):
            worker.submit(old_exchange(2 * worker_module.MAX_LAG_S))
        assert worker.drain(10)
        call.finish(None)
        assert recorded.skipped == [] and len(recorded.findings) == 200
        assert all(job.hold for job in link.jobs)  # a share of none banks nothing
    finally:
        worker.stop()


def test_once_the_helper_holds_all_it_may_what_is_queued_is_dropped_off_the_callers_path() -> None:
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, spare_cpu=lambda: 1.6, cpus=8)
    call: Exchange | None = None
    try:
        assert worker.wait_ready(5)
        link.full = True
        call = Exchange(Side.CLIENT, "tools/call", target="busy")
        for _ in range(200):
            worker.submit(old_exchange(2 * worker_module.MAX_LAG_S))
        deadline = time.monotonic() + 10
        while len(recorded.skipped) < 199 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [reason for _, reason in recorded.skipped] == [semconv.SKIP_OVERLOAD] * 199
        assert recorded.findings == []  # the one in the pipe's way is still being sent
        link.full = False
        call.finish(None)
        call = None
        assert worker.drain(10)
        assert len(recorded.findings) == 1 and len(recorded.skipped) == 199
    finally:
        link.full = False
        if call is not None:
            call.finish(None)
        worker.stop()


def test_a_pipe_full_for_a_moment_drops_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "LINK_STUCK_S", 5.0)
    recorded, link = Recorded(), ScriptedLink()
    worker = make_worker([link], recorded, spare_cpu=lambda: 1.6, cpus=8)
    assert worker.wait_ready(5)
    call = Exchange(Side.CLIENT, "tools/call", target="busy")
    try:
        link.full = True
        for _ in range(50):
            worker.submit(old_exchange(2 * worker_module.MAX_LAG_S))
        time.sleep(0.5)
        link.full = False
        call.finish(None)
        assert worker.drain(10)
        assert recorded.skipped == [] and len(recorded.findings) == 50
    finally:
        link.full = False
        call.finish(None)
        worker.stop()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_analysis() -> None:
    recorded = Recorded()
    parent_link = ScriptedLink()
    child_links: list[ScriptedLink] = []

    def factory(settings: Settings, mode: str) -> ScriptedLink:
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
                if worker.drain(5) and [item.target for item, _ in recorded.findings] == ["child"]:
                    status = 0 if child_links else 2
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert not parent_link.closed
        worker.submit(exchange(target="parent"))
        assert worker.drain(5)
        assert [item.target for item, _ in recorded.findings] == ["parent"]
    finally:
        worker.stop()


def test_sliced_pauses_long_python_and_removes_its_hook() -> None:
    def busy(seconds: float) -> int:
        # By this thread's CPU time: a loaded machine that deschedules it (or wakes it late
        # from a pause) must not leave it too little running time to pause in.
        end, calls = time.thread_time() + seconds, 0
        while time.thread_time() < end:
            calls += len(str(calls))  # function calls the profile hook sees
        return calls

    pauses: list[float] = []
    real_sleep = time.sleep

    def recording_sleep(seconds: float) -> None:
        pauses.append(seconds)
        real_sleep(seconds)

    time.sleep = recording_sleep
    try:
        with sliced():
            busy(20 * SLICE_S)
    finally:
        time.sleep = real_sleep
    assert sys.getprofile() is None
    assert len(pauses) >= 5


def test_sliced_keeps_a_profile_hook_someone_else_set() -> None:
    def theirs(frame: object, event: str, arg: object) -> None:
        return None

    sys.setprofile(theirs)
    try:
        with sliced():
            assert sys.getprofile() is theirs
        assert sys.getprofile() is theirs
    finally:
        sys.setprofile(None)


def test_only_a_response_that_still_crosses_a_transport_settles_at_transport_pace() -> None:
    megabyte = 1 << 20
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
    leaving, arrived = settle_seconds(megabyte, True), settle_seconds(megabyte, False)
    assert leaving == pytest.approx(SETTLE_S + megabyte / SETTLE_CHARS_PER_S)
    assert arrived == pytest.approx(SETTLE_S + megabyte / ARRIVED_SETTLE_CHARS_PER_S)
    assert arrived < leaving / 5
    assert settle_seconds(1 << 30, True) == settle_seconds(1 << 30, False) == MAX_SETTLE_S


class Marker:
    """A value whose lifetime a weak reference can watch (plain JSON values cannot be)."""

    def __str__(self) -> str:
        return "marker"


class CallStartingLink(ScriptedLink):
    """A scripted link during whose sending an MCP call starts (and stays in flight)."""

    def __init__(self) -> None:
        super().__init__()
        self.call: Exchange | None = None

    def sender(self, job: Job, request: object, response: object) -> Iterator[bool]:
        yield from super().sender(job, request, response)
        self.call = Exchange(Side.CLIENT, "tools/call", target="busy")


@contextlib.contextmanager
def listing_handed_over(tool_count: int) -> Iterator[tuple[weakref.ref[Marker], CallStartingLink]]:
    """A tools/list of `tool_count` tools handed to a worker whose sending starts a call
    (left in flight); yields a weak reference to a value of the payload, once the worker
    alone may hold the payload, and the link (its `call`)."""
    recorded, link = Recorded(), CallStartingLink()
    worker = make_worker([link], recorded)
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
        yield watch, link
    finally:
        if link.call is not None:
            link.call.finish(None)
        worker.stop()


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


def test_a_kept_payload_is_freed_under_sustained_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "MAX_KEEP_S", 0.3)
    with listing_handed_over(5000) as (watch, link):
        assert wait_for(lambda: watch() is None), "kept past MAX_KEEP_S while a call was in flight"
        assert link.call is not None and not link.call.end_ns  # still in flight
