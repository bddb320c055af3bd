# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""200 MCP sessions open at once over streamable HTTP against the demo server running under
`opentelemetry-instrument`: every call is counted, and the server's memory stays bounded.

Memory: the server's RSS (VmRSS) is read after a warm-up wave (tokenizer loaded, every code
path run once) and after each of two waves of 200 concurrent stateful sessions. The bound
is stated in the constants below: the first wave may grow RSS by at most RSS_WAVE_BOUND_MIB
(buffers, per-session SDK state, allocator high-water marks); the second, identical wave by
at most RSS_REPEAT_BOUND_MIB, so memory that grows with the number of sessions served fails.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples import demo_content, metrics
from examples.processes import Child, free_port, prometheus_env, start_module

from .conftest import require_sdk_configurator
from .raw_mcp import RawSession

pytestmark = pytest.mark.slow

SESSIONS = 200
CALLS_PER_SESSION = (("customer_lookup", {"customer_id": 11}), ("shipment_status", {"order_id": 12}))
WARMUP_SESSIONS = 10
WAVE_TIMEOUT_S = 60.0
BARRIER_TIMEOUT_S = 45.0
COUNT_TIMEOUT_S = 30.0
RSS_WAVE_BOUND_MIB = 64
RSS_REPEAT_BOUND_MIB = 8


@dataclass
class Server:
    child: Child
    mcp_port: int
    metrics_port: int

    def rss_mib(self) -> float:
        status = Path(f"/proc/{self.child.process.pid}/status").read_text()
        line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
        return int(line.split()[1]) / 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    require_sdk_configurator()
    mcp_port, metrics_port = free_port(), free_port()
    child = start_module(
        "concurrent-server",
        "examples.demo_server",
        ["--port", str(mcp_port)],
        prometheus_env("mcp-tokens-concurrent-server", metrics_port),
        tmp_path_factory.mktemp("e2e-concurrent"),
        ports=(mcp_port, metrics_port),
    )
    try:
        child.wait_ready(30.0)
        yield Server(child, mcp_port, metrics_port)
    finally:
        child.stop()


def _one_session(port: int, barrier: threading.Barrier) -> list[str]:
    """Initialize, wait until every session is open, call the tools, end the session."""
    session = RawSession(port)
    try:
        session.initialize()
        if session.server_info.get("name") != demo_content.SERVER_NAME:
            return [f"unexpected server {session.server_info}"]
        barrier.wait(BARRIER_TIMEOUT_S)
        problems = []
        for tool, arguments in CALLS_PER_SESSION:
            result = session.call_tool(tool, arguments)
            expected = demo_content.tool_result(tool, arguments)
            if {key: result.get(key) for key in expected} != expected or result.get("isError"):
                problems.append(f"{tool}: result differs from the demo's")
        return problems
    finally:
        session.close()


def _wave(port: int, sessions: int) -> list[str]:
    barrier = threading.Barrier(sessions)
    with ThreadPoolExecutor(max_workers=sessions, thread_name_prefix="mcp-session") as pool:
        futures = [pool.submit(_one_session, port, barrier) for _ in range(sessions)]
        done, not_done = wait(futures, timeout=WAVE_TIMEOUT_S)
        if not_done:
            barrier.abort()
        problems = [f"{len(not_done)} sessions did not finish in {WAVE_TIMEOUT_S} s"] if not_done else []
        for future in done:
            error = future.exception()
            problems += [repr(error)] if error is not None else future.result()
    return problems


def _run_wave(server: Server, sessions: int, calls_before: int) -> float:
    assert _wave(server.mcp_port, sessions) == []
    expected = calls_before + sessions * len(CALLS_PER_SESSION)
    seen = metrics.tool_calls_seen(metrics.wait_for_calls(server.metrics_port, expected, COUNT_TIMEOUT_S))
    assert seen == expected
    return server.rss_mib()


def test_200_concurrent_sessions_are_all_counted_with_bounded_memory(server: Server) -> None:
    started = time.monotonic()
    rss_warm = _run_wave(server, WARMUP_SESSIONS, 0)
    calls = WARMUP_SESSIONS * len(CALLS_PER_SESSION)
    rss_first = _run_wave(server, SESSIONS, calls)
    calls += SESSIONS * len(CALLS_PER_SESSION)
    rss_second = _run_wave(server, SESSIONS, calls)
    elapsed = time.monotonic() - started
    print(
        f"\nserver RSS: warm {rss_warm:.1f} MiB, after wave 1 {rss_first:.1f} MiB, after wave 2 "
        f"{rss_second:.1f} MiB; {2 * SESSIONS + WARMUP_SESSIONS} sessions in {elapsed:.1f} s"
    )
    assert rss_first - rss_warm <= RSS_WAVE_BOUND_MIB
    assert rss_second - rss_first <= RSS_REPEAT_BOUND_MIB
