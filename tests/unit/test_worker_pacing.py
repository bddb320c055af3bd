"""The analysis worker stays out of the application's way: lower priority, short GIL holds."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
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
