# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The registry of calls in flight (inflight.py), the activity board it writes for the
helper, and the helper's waits on it (activity.py)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens.activity import ActivityBoard, QuietWaiter
from opentelemetry.instrumentation.mcp_tokens.cpu import SpareCpu
from opentelemetry.instrumentation.mcp_tokens.engine.chunking import count_in_chunks
from opentelemetry.instrumentation.mcp_tokens.inflight import InFlight
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd_create is Linux's")


def reader_of(board: ActivityBoard) -> ActivityBoard:
    reader = ActivityBoard.open(os.dup(board.fileno()))
    assert reader is not None
    return reader


def spare(tmp_path: Path, idle: int, busy: int) -> SpareCpu:
    """A reading of a machine with `idle` and `busy` jiffies since the last one."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  0 0 0 0 0 0 0 0 0 0\n")
    reading = SpareCpu(Pacing(spare_every_s=0.0), str(stat))
    reading.cores()
    stat.write_text(f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n")
    return reading


@linux_only
def test_what_the_application_publishes_the_helper_reads() -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        assert not reader.busy()
        board.publish(1, 0.0)
        assert reader.busy()  # an operation in flight
        board.publish(0, time.monotonic() + 0.05)
        assert reader.busy()  # its response path still settles
        time.sleep(0.06)
        assert not reader.busy()
    finally:
        reader.close()
        board.close()


@linux_only
def test_operations_in_flight_are_published_from_their_start_to_their_settling() -> None:
    in_flight = InFlight()
    fd = in_flight.board_fd()
    assert fd is not None and in_flight.board_fd() == fd  # one board per process
    reader = ActivityBoard.open(os.dup(fd))
    assert reader is not None
    try:
        first, second = object(), object()
        in_flight.add(first)
        in_flight.add(second)
        in_flight.discard(first)
        assert reader.busy() and in_flight.busy()
        in_flight.discard(second)
        in_flight.settling(0.05)
        assert reader.busy() and in_flight.busy()
        time.sleep(0.06)
        assert not reader.busy() and not in_flight.busy()
    finally:
        reader.close()


def test_an_operation_never_finished_stops_counting_after_a_while() -> None:
    in_flight = InFlight(Pacing(stale_s=0.1, settle_s=0.0))
    lost, newer = object(), object()
    in_flight.add(lost)
    time.sleep(0.12)
    in_flight.add(newer)
    assert in_flight.busy()  # the newer one
    in_flight.discard(newer)
    assert not in_flight.busy()  # the lost one is forgotten


def test_the_registry_tracks_a_bounded_number_of_operations() -> None:
    in_flight = InFlight(Pacing(max_tracked=3))
    operations = [object() for _ in range(10)]
    for operation in operations:
        in_flight.add(operation)
    assert len(in_flight._started) == 3


def test_the_worker_waits_through_a_burst_until_a_quiet_moment() -> None:
    in_flight = InFlight(Pacing(poll_s=0.01, settle_s=0.03))
    first = object()
    in_flight.add(first)

    def burst() -> None:
        time.sleep(0.05)
        in_flight.discard(first)  # settles for 30 ms, during which the next call starts
        second = object()
        time.sleep(0.01)
        in_flight.add(second)
        time.sleep(0.1)
        in_flight.discard(second)

    thread = threading.Thread(target=burst)
    started = time.monotonic()
    thread.start()
    in_flight.wait_until_quiet(5.0)
    waited = time.monotonic() - started
    thread.join()
    assert waited >= 0.05 + 0.01 + 0.1 + 0.03 * 0.9  # after the second call and its settling
    started = time.monotonic()
    in_flight.add(first)
    in_flight.wait_until_quiet(0.1)  # at most the timeout
    assert time.monotonic() - started < 1.0
    in_flight.discard(first)


@linux_only
def test_the_waiter_waits_for_quiet_and_at_most_its_bound_with_idle_cpu(tmp_path: Path) -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        pacing = Pacing(max_lag_s=0.2)
        waiter = QuietWaiter(reader, pacing, spare(tmp_path, idle=100, busy=0))
        board.publish(0, time.monotonic() + 0.05)
        waiter.begin(time.time())
        started = time.monotonic()
        waiter.wait()
        assert time.monotonic() - started >= 0.04  # until the response path settled
        board.publish(1, 0.0)  # an operation that never ends, idle CPU beside it
        waiter.begin(time.time())
        started = time.monotonic()
        waiter.wait()
        waiter.wait()  # the bound is the job's, not each pause's
        assert time.monotonic() - started >= 0.19
        waiter.begin(time.time() - 1)  # a job already past its bound
        started = time.monotonic()
        waiter.wait()
        assert time.monotonic() - started < 0.19
    finally:
        reader.close()
        board.close()


@linux_only
def test_without_idle_cpu_the_waiter_waits_past_its_bound_for_quiet(tmp_path: Path) -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        waiter = QuietWaiter(reader, Pacing(), spare(tmp_path, idle=0, busy=100))
        board.publish(1, 0.0)  # calls go on, and the machine has no idle core
        waiter.begin(time.time() - 10)  # a job already past its bound
        done = threading.Event()
        thread = threading.Thread(target=lambda: (waiter.wait(), done.set()), daemon=True)
        thread.start()
        assert not done.wait(0.3)  # waits on
        board.publish(0, 0.0)  # the calls pause
        assert done.wait(2)
    finally:
        reader.close()
        board.close()


def test_without_a_board_the_waiter_never_waits() -> None:
    waiter = QuietWaiter(None)
    waiter.begin(time.time() + 5)
    waiter.wait()  # returns at once (the test's own timeout would catch a wait)


@pytest.mark.parametrize("threads", [1, 2])
def test_counting_in_chunks_pauses_before_each_chunk(threads: int) -> None:
    pauses = []
    text = "word " * 10_000
    total = count_in_chunks(len, text, chunk_chars=4_000, threads=threads, pause=lambda: pauses.append(1))
    assert total == len(text)
    assert len(pauses) >= len(text) // 4_000


@linux_only
def test_a_forked_child_lets_go_of_its_parents_board() -> None:
    in_flight = InFlight()
    fd = in_flight.board_fd()
    assert fd is not None
    in_flight._after_fork_in_child()  # what os.register_at_fork runs in the child
    with pytest.raises(OSError):
        os.fstat(fd)  # the child's copy of the descriptor is closed
    child_fd = in_flight.board_fd()
    assert child_fd is not None  # a board of its own for the child's helper
    in_flight.add(object())  # publishing keeps working
