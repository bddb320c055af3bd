"""The analysis worker stays out of the application's way: lower priority, short GIL holds."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens.exchange import (
    ARRIVED_SETTLE_CHARS_PER_S,
    MAX_SETTLE_S,
    SETTLE_CHARS_PER_S,
    SETTLE_S,
    Exchange,
    Side,
    settle_seconds,
)
from opentelemetry.instrumentation.mcp_tokens.worker import (
    SLICE_S,
    AnalysisWorker,
    lower_thread_priority,
    sliced,
)

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")


def _nice_of_current_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


@linux_only
def test_lower_priority_changes_the_calling_thread_only() -> None:
    before_main = _nice_of_current_thread()
    seen: dict[str, int] = {}

    def run() -> None:
        before = _nice_of_current_thread()
        seen["lowered"] = int(lower_thread_priority(5))
        seen["delta"] = _nice_of_current_thread() - before

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    assert seen == {"lowered": 1, "delta": min(5, 19 - before_main)}
    assert _nice_of_current_thread() == before_main


@linux_only
def test_worker_thread_runs_at_lower_priority() -> None:
    nice: list[int] = []
    worker = AnalysisWorker(lambda e: nice.append(_nice_of_current_thread()), lambda e: None)
    worker.start()
    try:
        worker.submit(Exchange(Side.CLIENT, "tools/call"))
        assert worker.drain(5)
    finally:
        worker.stop()
    assert nice and nice[0] > _nice_of_current_thread()


def test_sliced_pauses_long_python_and_removes_its_hook() -> None:
    def busy(seconds: float) -> int:
        end, calls = time.perf_counter() + seconds, 0
        while time.perf_counter() < end:
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


# --- waiting for the process's MCP operations in flight ---------------------------------------

from opentelemetry.instrumentation.mcp_tokens import worker as worker_module  # noqa: E402
from opentelemetry.instrumentation.mcp_tokens.exchange import IN_FLIGHT, InFlight  # noqa: E402


def test_an_exchange_is_in_flight_from_creation_to_finish() -> None:
    flight = InFlight()
    assert not flight.wait_until_quiet(1.0), "nothing in flight: no wait"
    started = object()  # an Exchange would register in the process-wide IN_FLIGHT too
    flight.add(started)
    finisher = threading.Timer(0.05, flight.discard, (started,))
    before = time.perf_counter()
    finisher.start()
    assert flight.wait_until_quiet(5.0)
    assert 0.04 <= time.perf_counter() - before < 2.0, "woken by the finish, not the timeout"


def test_exchanges_register_themselves_until_finished_or_submitted() -> None:
    running = Exchange(Side.SERVER, "tools/call")
    assert id(running) in IN_FLIGHT._started
    running.finish({"content": []})
    assert id(running) not in IN_FLIGHT._started
    # Built with its response already (tests, replays): never in flight.
    done = Exchange(Side.SERVER, "tools/call", response={"content": []})
    assert id(done) not in IN_FLIGHT._started
    lost = Exchange(Side.CLIENT, "tools/list")
    worker = AnalysisWorker(lambda e: None, lambda e: None)
    worker.submit(lost)  # a path that never called finish(): submitting ends it too
    assert id(lost) not in IN_FLIGHT._started


def test_an_operation_that_never_finishes_stops_holding_the_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    flight = InFlight()
    monkeypatch.setattr(InFlight, "STALE_S", 0.05)
    flight.add(object())
    time.sleep(0.1)
    before = time.perf_counter()
    assert not flight.wait_until_quiet(5.0)
    assert time.perf_counter() - before < 1.0


def test_a_finished_response_path_settles_before_the_worker_resumes() -> None:
    flight = InFlight()
    flight.settling(0.05)
    before = time.perf_counter()
    assert flight.wait_until_quiet(5.0)
    assert 0.04 <= time.perf_counter() - before < 1.0


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


def test_the_worker_pauses_while_an_operation_is_in_flight() -> None:
    """A long analysis stops at its next pause while a call runs, and resumes when it ends."""
    progress: list[float] = []
    call: list[Exchange] = []

    def analyse(exchange: Exchange) -> None:
        with sliced():
            end = time.perf_counter() + 0.4
            while time.perf_counter() < end:
                progress.append(time.perf_counter())
                if len(progress) == 50:  # a call starts while the analysis runs
                    call.append(Exchange(Side.CLIENT, "tools/call"))

    worker = AnalysisWorker(analyse, lambda e: None)
    worker.start()
    try:
        finished = Exchange(Side.CLIENT, "tools/call")
        finished.finish({"content": []})
        worker.submit(finished)
        deadline = time.monotonic() + 5
        while not call and time.monotonic() < deadline:
            time.sleep(0.001)
        assert call, "the analysis did not start"
        # The worker waits from its next pause (within a slice).
        time.sleep(0.03)
        waiting_since = len(progress)
        time.sleep(0.01)
        assert len(progress) == waiting_since, "no analysis while the call is in flight"
        call[0].finish({"content": []})
        assert worker.drain(5)
    finally:
        worker.stop()


def test_the_worker_is_behind_when_an_exchange_waited_too_long_or_the_queue_holds_too_much() -> None:
    worker = AnalysisWorker(lambda e: None, lambda e: None, max_pending_chars=1000)
    assert not worker._is_behind(0.0)
    assert not worker._is_behind(worker_module.MAX_LAG_S)
    assert worker._is_behind(worker_module.MAX_BACKLOG_S)
    worker._pending_chars = 499
    assert not worker._is_behind(0.0)
    worker._pending_chars = 500
    assert worker._is_behind(0.0)


def _finished(ago_s: float = 0.0) -> Exchange:
    exchange = Exchange(Side.CLIENT, "tools/call")
    exchange.finish({"content": []})
    exchange.end_ns -= int(ago_s * 1e9)
    return exchange


def test_exchanges_the_worker_is_behind_on_go_to_on_backlog() -> None:
    counted: list[Exchange] = []
    estimated: list[Exchange] = []
    worker = AnalysisWorker(counted.append, lambda e: None, on_backlog=estimated.append)
    worker.start()
    try:
        recent, old = _finished(), _finished(2 * worker_module.MAX_BACKLOG_S)
        worker.submit(recent)
        worker.submit(old)
        assert worker.drain(5)
        assert counted == [recent]
        assert estimated == [old]
    finally:
        worker.stop()


def test_without_on_backlog_the_worker_processes_what_it_is_behind_on() -> None:
    counted: list[Exchange] = []
    worker = AnalysisWorker(counted.append, lambda e: None)
    worker.start()
    try:
        old = _finished(2 * worker_module.MAX_BACKLOG_S)
        worker.submit(old)
        assert worker.drain(5)
        assert counted == [old]
    finally:
        worker.stop()


@contextlib.contextmanager
def _worker_beside_a_call(**options: Any) -> Iterator[tuple[AnalysisWorker, list[float], Exchange]]:
    """A worker that notes when it processes each exchange, and a call in flight until the
    block finishes it (or until the way out)."""
    processed: list[float] = []
    worker = AnalysisWorker(lambda e: processed.append(time.perf_counter()), lambda e: None, **options)
    call = Exchange(Side.SERVER, "tools/call")
    try:
        yield worker, processed, call
    finally:
        call.finish({"content": []})
        worker.stop()


def test_an_operation_in_flight_delays_an_analysis_until_max_lag_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A long call in flight (a slow tool, say) holds the analysis back by MAX_LAG_S, no more."""
    monkeypatch.setattr(worker_module, "MAX_LAG_S", 0.3)
    with _worker_beside_a_call() as (worker, processed, _):
        worker.start()
        submitted = time.perf_counter()
        worker.submit(_finished())
        assert worker.drain(5)
        assert 0.25 <= processed[0] - submitted < 2.0


def test_with_its_queue_half_full_the_worker_does_not_wait_for_calls_in_flight() -> None:
    """Waiting then would fill the queue, and exchanges past its bound are dropped."""
    with _worker_beside_a_call(max_pending=4) as (worker, processed, _):
        for _ in range(3):
            worker.submit(_finished())
        started = time.perf_counter()
        worker.start()  # takes the first with two behind it: half of max_pending
        deadline = time.monotonic() + 5
        while not processed and time.monotonic() < deadline:
            time.sleep(0.005)
        assert processed and processed[0] - started < 0.5


def test_an_analysis_starts_once_the_calls_in_flight_are_over() -> None:
    with _worker_beside_a_call() as (worker, processed, call):
        worker.start()
        worker.submit(_finished())
        time.sleep(0.1)
        assert not processed, "no analysis while a call is in flight"
        ended = time.perf_counter()
        call.finish({"content": []})
        assert worker.drain(5)
        assert 0 <= processed[0] - ended < 0.5


def test_the_worker_lets_go_of_an_exchange_once_processed() -> None:
    """Not when the next one arrives: freeing a large payload must not land at a random later time."""
    import gc
    import weakref

    class Payload(dict):  # type: ignore[type-arg]
        pass

    worker = AnalysisWorker(lambda e: None, lambda e: None)
    worker.start()
    try:
        payload = Payload(content=[])
        gone = weakref.ref(payload)
        done = Exchange(Side.CLIENT, "tools/call")
        done.finish(payload)
        worker.submit(done)
        del payload, done
        assert worker.drain(5)
        deadline = time.monotonic() + 5
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.01)
            gc.collect()
        assert gone() is None
    finally:
        worker.stop()


# --- under sustained load: a fifth of the pace ------------------------------------------------


def _burn_cpu(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_in_flight_is_busy_until_the_operation_and_its_settling_are_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flight = InFlight()
    assert not flight.busy()
    operation = object()
    flight.add(operation)
    assert flight.busy()
    flight.discard(operation)
    flight.settling(0.05)
    assert flight.busy(), "the response path is still settling"
    time.sleep(0.06)
    assert not flight.busy()
    monkeypatch.setattr(InFlight, "STALE_S", 0.01)
    flight.add(object())  # never finished
    time.sleep(0.05)
    assert not flight.busy(), "a stale operation does not keep the worker slow"


def test_with_operations_in_flight_and_no_wait_left_a_pause_is_four_times_the_cpu_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flight = InFlight()
    monkeypatch.setattr(worker_module, "IN_FLIGHT", flight)
    worker_module.deferring_for(0.0)
    worker_module._slices.cpu_since = time.thread_time()
    _burn_cpu(0.001)
    assert worker_module.busy_pause_s() == worker_module.YIELD_S, "nothing in flight: a GIL hand-over"
    flight.add(object())
    worker_module._slices.cpu_since = time.thread_time()
    _burn_cpu(0.001)
    pause = worker_module.busy_pause_s()
    assert worker_module.BUSY_PAUSE_RATIO * 0.001 <= pause <= worker_module.MAX_BUSY_PAUSE_S
    worker_module._slices.cpu_since = time.thread_time()
    _burn_cpu(0.01)
    assert worker_module.busy_pause_s() == worker_module.MAX_BUSY_PAUSE_S, "one pause is bounded"


def test_a_worker_under_sustained_load_uses_about_a_fifth_of_the_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pure-Python analysis in slices, with a call in flight the whole time and no wait
    budget: the worker's CPU over wall time stays near 1 / (1 + BUSY_PAUSE_RATIO)."""
    flight = InFlight()
    monkeypatch.setattr(worker_module, "IN_FLIGHT", flight)
    flight.add(object())
    shares: list[float] = []

    def analyse(exchange: Exchange) -> None:
        worker_module.deferring_for(0.0)
        wall, cpu = time.perf_counter(), time.thread_time()
        with sliced():
            while time.perf_counter() - wall < 0.3:
                sum(range(200))
        shares.append((time.thread_time() - cpu) / (time.perf_counter() - wall))

    worker = AnalysisWorker(analyse, lambda e: None)
    worker.start()
    try:
        worker.submit(_finished(ago_s=2 * worker_module.MAX_LAG_S))
        assert worker.drain(10)
    finally:
        worker.stop()
    assert shares and shares[0] < 2 / (1 + worker_module.BUSY_PAUSE_RATIO)


def test_waiting_for_quiet_lasts_through_a_burst_of_operations() -> None:
    """The next call of a burst starts while the previous one's response path settles: the
    worker waits for it too, rather than resuming in the middle of it."""
    flight = InFlight()
    first, second = object(), object()
    flight.add(first)

    def next_call() -> None:
        flight.discard(first)
        flight.add(second)

    threading.Timer(0.03, next_call).start()
    threading.Timer(0.08, flight.discard, (second,)).start()
    before = time.perf_counter()
    assert flight.wait_until_quiet(5.0)
    assert time.perf_counter() - before >= 0.08


def test_a_stale_operation_is_forgotten_while_newer_ones_stay_in_flight(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    flight = InFlight()
    monkeypatch.setattr(InFlight, "STALE_S", 0.05)
    lost, running = object(), object()
    flight.add(lost)
    time.sleep(0.08)
    flight.add(running)
    assert flight.busy()
    assert id(lost) not in flight._started and id(running) in flight._started
    flight.discard(running)
    time.sleep(0.01)  # past the settling of its response path
    assert not flight.busy()
