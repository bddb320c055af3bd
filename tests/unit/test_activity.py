"""The activity board the application writes and its analysis helper reads."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import time

import pytest
from opentelemetry.instrumentation.mcp_tokens.activity import ActivityBoard, QuietWaiter
from opentelemetry.instrumentation.mcp_tokens.engine.chunking import count_in_chunks
from opentelemetry.instrumentation.mcp_tokens.exchange import InFlight

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd_create is Linux's")


def reader_of(board: ActivityBoard) -> ActivityBoard:
    reader = ActivityBoard.open(os.dup(board.fileno()))
    assert reader is not None
    return reader


def test_what_the_application_publishes_the_helper_reads() -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        assert not reader.busy()
        board.publish(1, 0.0, 0.0)
        assert reader.busy()  # an operation in flight
        assert not reader.alongside()  # no idle CPU for the helper beside it
        board.publish(0, time.monotonic() + 0.05, 0.25)
        assert reader.busy()  # its response path still settles
        assert reader.alongside()
        time.sleep(0.06)
        assert not reader.busy()
    finally:
        reader.close()
        board.close()


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
        assert reader.busy()
        in_flight.discard(second)
        in_flight.settling(0.05)
        assert reader.busy()
        time.sleep(0.06)
        assert not reader.busy()
    finally:
        reader.close()


def test_the_waiter_waits_for_quiet_and_at_most_its_bound() -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        waiter = QuietWaiter(reader)
        board.publish(0, time.monotonic() + 0.05, 0.1)
        waiter.begin(time.time() + 0.2)
        started = time.monotonic()
        waiter.wait()
        assert 0.04 <= time.monotonic() - started < 0.15  # until the response path settled
        board.publish(1, 0.0, 0.1)  # an operation that never ends, idle CPU beside it
        waiter.begin(time.time() + 0.2)
        started = time.monotonic()
        waiter.wait()
        waiter.wait()  # the bound is the exchange's, not each pause's
        assert 0.19 <= time.monotonic() - started < 0.35
        waiter.begin(time.time() - 1)  # an exchange already past its bound
        started = time.monotonic()
        waiter.wait()
        assert time.monotonic() - started < 0.05
    finally:
        reader.close()
        board.close()


def test_without_idle_cpu_the_waiter_waits_past_its_bound_for_quiet() -> None:
    board = ActivityBoard.create()
    assert board is not None
    reader = reader_of(board)
    try:
        waiter = QuietWaiter(reader)
        board.publish(1, 0.0, 0.0)  # calls go on, and the machine has no idle core
        waiter.begin(time.time() - 1)  # an exchange already past its bound
        done = threading.Event()
        thread = threading.Thread(target=lambda: (waiter.wait(), done.set()), daemon=True)
        thread.start()
        assert not done.wait(0.3)  # waits on
        board.publish(0, 0.0, 0.0)  # the calls pause
        assert done.wait(2)
        board.publish(1, 0.0, 0.0)
        done.clear()
        thread = threading.Thread(target=lambda: (waiter.wait(), done.set()), daemon=True)
        thread.start()
        assert not done.wait(0.1)
        board.publish(1, 0.0, 0.3)  # the machine has idle CPU again: work beside the calls
        assert done.wait(2)
    finally:
        reader.close()
        board.close()


def test_the_helper_share_is_published_for_the_helper() -> None:
    in_flight = InFlight()
    fd = in_flight.board_fd()
    assert fd is not None
    reader = ActivityBoard.open(os.dup(fd))
    assert reader is not None
    try:
        assert reader.alongside()  # until the worker has read the machine: some
        in_flight.set_helper_share(0.0)
        assert not reader.alongside()
        in_flight.set_helper_share(0.4)
        assert reader.alongside()
    finally:
        reader.close()


def test_without_a_board_the_waiter_never_waits() -> None:
    waiter = QuietWaiter(None)
    waiter.begin(time.time() + 5)
    started = time.monotonic()
    waiter.wait()
    assert time.monotonic() - started < 0.05


@pytest.mark.parametrize("threads", [1, 2])
def test_counting_in_chunks_pauses_before_each_chunk(threads: int) -> None:
    pauses = []
    text = "word " * 10_000
    total = count_in_chunks(len, text, chunk_chars=4_000, threads=threads, pause=lambda: pauses.append(1))
    assert total == len(text)
    assert len(pauses) >= len(text) // 4_000


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


def test_a_waiting_worker_looks_less_often_the_longer_calls_stay_in_flight() -> None:
    looks: list[float] = []

    class Counted(InFlight):
        def _forget_stale(self) -> bool:
            looks.append(time.monotonic())
            return super()._forget_stale()

    in_flight = Counted()
    call = object()
    in_flight.add(call)
    started = time.monotonic()
    assert in_flight.wait_until_quiet(0.5)
    assert time.monotonic() - started >= 0.5
    gaps = [after - before for before, after in itertools.pairwise(looks)]
    # 5, 10, 20 ms, then 40 ms: about 15 looks in 0.5 s rather than 100.
    assert 8 <= len(looks) <= 25
    assert gaps[0] < 0.03 and max(gaps) >= 0.035
    assert max(gaps) <= InFlight.MAX_POLL_S + 0.03
    in_flight.discard(call)
