# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp_tokens_prometheus`: the merge rules, the shared directory, the worker files, the scrape
notifications (a worker sleeps until a scrape rings it), and one endpoint for a forked server
(a real fork, in a subprocess)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens import prometheus as exporter
from opentelemetry.exporter.mcp_tokens.prometheus import McpTokensPrometheusReader, notify
from opentelemetry.exporter.mcp_tokens.prometheus.merge import Archive, ChangeClock, merge
from opentelemetry.exporter.mcp_tokens.prometheus.notify import Bell, Doorbell
from opentelemetry.exporter.mcp_tokens.prometheus.samples import Family, SampleKey, flatten, rebuild
from opentelemetry.exporter.mcp_tokens.prometheus.store import WorkerStore, read_generation, read_worker_file
from opentelemetry.exporter.mcp_tokens.prometheus.tree import (
    PREFIX,
    TREE_LOCK,
    Tree,
    remove_stale,
    worker_socket_name,
    worker_token,
)
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tests.unit import prometheus_fork_app as fork_app

REPO = Path(__file__).resolve().parents[2]
COUNTER = Family("mcp_tokens_overhead", "counter", "Tokens that carry no data.", "")
LISTING = Family("mcp_tokens_tool_definition", "gauge", "Tokens of each tool's definition.", "")
BUSY = Family("http_server_active_requests", "gauge", "", "")


def key(family: Family, sample: str, **labels: str) -> SampleKey:
    return SampleKey(family, sample, tuple(labels.items()))


# --- merge -----------------------------------------------------------------------------------
def test_counters_add_up_and_a_listing_is_taken_from_the_latest_change() -> None:
    total = key(COUNTER, "mcp_tokens_overhead_total", kind="duplicate")
    tool = key(LISTING, "mcp_tokens_tool_definition", tool="search")
    busy = key(BUSY, "http_server_active_requests")
    first = {total: (10.0, 5.0), tool: (120.0, 100.0), busy: (2.0, 0.0)}
    second = {total: (7.0, 9.0), tool: (90.0, 200.0), busy: (1.0, 0.0)}
    assert merge([first, second]) == {total: 17.0, tool: 90.0, busy: 3.0}
    assert list(merge([second, first])) == [total, tool, busy]  # first-seen order


def test_a_servers_tool_count_is_a_listing_too_never_a_sum_over_workers() -> None:
    tools = key(
        Family("mcp_tokens_tools", "gauge", "Tools in each server's latest tools/list.", ""),
        "mcp_tokens_tools",
    )
    assert merge([{tools: (130.0, 5.0)}, {tools: (130.0, 4.0)}, {tools: (128.0, 1.0)}]) == {tools: 130.0}


def test_what_exited_workers_counted_stays_and_their_live_gauges_go() -> None:
    total = key(COUNTER, "mcp_tokens_overhead_total")
    tool = key(LISTING, "mcp_tokens_tool_definition", tool="search")
    busy = key(BUSY, "http_server_active_requests")
    archive = Archive()
    archive.fold({total: (4.0, 1.0), tool: (50.0, 300.0), busy: (5.0, 0.0)})
    archive.fold({total: (6.0, 2.0), tool: (40.0, 100.0)})
    assert archive.values == {total: (10.0, 2.0), tool: (50.0, 300.0)}
    running = {total: (1.0, 0.0), tool: (45.0, 200.0), busy: (1.0, 0.0)}
    assert merge([running, archive.values]) == {total: 11.0, tool: 50.0, busy: 1.0}


def test_the_change_clock_stamps_a_value_when_it_changes() -> None:
    tool = key(LISTING, "mcp_tokens_tool_definition")
    clock = ChangeClock()
    assert clock.stamp({tool: 10.0}, now=1.0) == {tool: (10.0, 1.0)}
    assert clock.stamp({tool: 10.0}, now=2.0) == {tool: (10.0, 1.0)}
    assert clock.stamp({tool: 12.0}, now=3.0) == {tool: (12.0, 3.0)}


# --- samples ---------------------------------------------------------------------------------
def stock_and_flattened() -> tuple[bytes, CollectorRegistry]:
    """The stock exporter's page for a few instruments, and a registry serving the same values
    flattened and rebuilt (what the merged endpoint serves for one process)."""
    stock = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=stock)])
    meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "1.0", schema_url="https://x")
    meter.create_counter("mcp_tokens.overhead", unit="{token}").add(
        7, {"mcp_tokens.overhead.kind": "duplicate"}
    )
    histogram = meter.create_histogram("mcp.server.operation.duration", unit="s")
    histogram.record(0.25, {"mcp.method.name": "tools/call", "gen_ai.tool.name": "search"})
    meter.create_gauge("mcp_tokens.tool.definition", unit="{token}").set(42, {"gen_ai.tool.name": "s"})
    info, values = flatten(stock.collect())

    class Rebuilt:
        def collect(self) -> list[object]:
            return [*info, *rebuild(values)]

    rebuilt = CollectorRegistry()
    rebuilt.register(Rebuilt())  # type: ignore[arg-type]
    page = generate_latest(stock)
    provider.shutdown()
    return page, rebuilt


def test_flattening_and_rebuilding_gives_the_stock_exporters_page() -> None:
    page, rebuilt = stock_and_flattened()
    assert b"mcp_server_operation_duration_seconds_bucket" in page
    assert generate_latest(rebuilt) == page


def test_a_sample_key_survives_its_file_encoding() -> None:
    original = key(COUNTER, "mcp_tokens_overhead_total", tool='n\u00e4me "quoted"', le="+Inf")
    assert SampleKey.decode(original.encode()) == original


# --- the directory and the worker files -------------------------------------------------------
def test_a_worker_file_holds_cumulative_values_and_the_generation(tmp_path: Path) -> None:
    tree, lock_fd = Tree.create(tmp_path)
    try:
        store = WorkerStore(*tree.new_worker_file(worker_token()))
        (path,) = tree.worker_files()
        assert read_generation(path) == -1 and read_worker_file(path) == ({}, -1)
        total = key(COUNTER, "mcp_tokens_overhead_total")
        labels = {f"tool_{i}": "x" * 50 for i in range(40)}
        many = {
            key(COUNTER, "mcp_tokens_overhead_total", n=str(i), **labels): (float(i), 0.0) for i in range(400)
        }
        store.write({total: (3.0, 0.0), **many}, generation=1)  # past the file's first 64 KiB
        store.write({total: (5.0, 0.0)}, generation=2)
        values, generation = read_worker_file(path)
        assert generation == 2 == read_generation(path)
        assert values[total] == (5.0, 0.0) and len(values) == 401
        assert path.stat().st_size > 1 << 16
        store.close()
    finally:
        os.close(lock_fd)


def test_only_directories_of_servers_that_have_gone_are_removed(tmp_path: Path) -> None:
    alive, alive_lock = Tree.create(tmp_path)
    gone, gone_lock = Tree.create(tmp_path)
    busy, busy_lock = Tree.create(tmp_path)
    _, worker_lock = busy.new_worker_file(worker_token())
    os.close(gone_lock)
    os.close(busy_lock)  # its root has gone, one of its workers still runs
    unrelated = tmp_path / "someone-elses"
    unrelated.mkdir()
    remove_stale(tmp_path)
    assert alive.path.is_dir() and busy.path.is_dir() and unrelated.is_dir()
    assert not gone.path.exists()
    os.close(worker_lock)
    remove_stale(tmp_path)
    assert not busy.path.exists() and alive.path.is_dir()
    assert (alive.path / TREE_LOCK).exists() and alive.path.name.startswith(PREFIX)
    os.close(alive_lock)


# --- scrape notifications --------------------------------------------------------------------
needs_notifications = pytest.mark.skipif(not notify.AVAILABLE, reason="no AF_UNIX datagram sockets")
PROC = Path("/proc/self/task")


@pytest.fixture(params=["short", "long"])
def socket_base(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """Where trees are created: a directory short enough for socket paths, or one too deep for
    them (reached through /proc/self/fd)."""
    if request.param == "long":
        if not PROC.is_dir():
            pytest.skip("deep directories need /proc")
        base = tmp_path / ("d" * 100)
        base.mkdir()
        yield base
        return
    base = Path(tempfile.mkdtemp(prefix="mt-"))
    try:
        if len(os.fsencode(base)) > 40:
            pytest.skip("the system's temporary directory is too deep for a short socket path")
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextmanager
def ringing(base: Path, workers: int) -> Iterator[tuple[Tree, Bell, list[Doorbell]]]:
    """A tree in `base` with the root's socket and `workers` workers' sockets, closed after."""
    tree, lock_fd = Tree.create(base)
    bell = Bell(tree.path)
    doorbells = [Doorbell(tree.path, worker_socket_name(worker_token())) for _ in range(workers)]
    try:
        yield tree, bell, doorbells
    finally:
        for doorbell in doorbells:
            doorbell.close()
        bell.close()
        os.close(lock_fd)


@needs_notifications
def test_the_root_rings_every_worker_and_hears_their_answers(socket_base: Path) -> None:
    with ringing(socket_base, 3) as (tree, bell, workers):
        names = tree.worker_sockets()
        assert sorted(worker.name for worker in workers) == names
        assert (tree.path / names[0]).is_socket()
        assert bell.ring(1, names) == bell.ring(2, names) == set(names)
        for worker in workers:
            assert worker.wait() == 2  # two scrapes queued up while it was busy: the newest
        workers[0].answer(2)
        workers[1].answer(1)  # an answer to an earlier scrape does not count
        assert bell.wait(2, set(names), time.monotonic() + 0.2) == {workers[1].name, workers[2].name}
        workers[1].answer(2)
        workers[2].answer(2)
        assert bell.wait(2, {workers[1].name, workers[2].name}, time.monotonic() + 5) == set()
        # A worker that died (its socket closed, its name left behind) is not rung, and its name goes.
        workers[2].close()
        assert bell.ring(3, tree.worker_sockets()) == {workers[0].name, workers[1].name}
        assert tree.worker_sockets() == sorted([workers[0].name, workers[1].name])


@needs_notifications
def test_more_answers_than_the_roots_queue_holds_all_arrive(tmp_path: Path) -> None:
    def answer(worker: Doorbell) -> None:
        generation = worker.wait()
        if generation is not None:
            worker.answer(generation)

    with ringing(tmp_path, 24) as (tree, bell, workers):
        threads = [threading.Thread(target=answer, args=(worker,)) for worker in workers]
        try:
            for thread in threads:
                thread.start()
            rung = bell.ring(1, tree.worker_sockets())
            assert len(rung) == 24  # far more than Linux's default queue of 10 datagrams
            assert bell.wait(1, rung, time.monotonic() + 10) == set()
        finally:
            for worker in workers:
                worker.wake()
            for thread in threads:
                thread.join(5)


@needs_notifications
def test_a_waiting_worker_is_woken_at_shutdown(tmp_path: Path) -> None:
    tree, lock_fd = Tree.create(tmp_path)
    worker = Doorbell(tree.path, worker_socket_name(worker_token()))
    woken: list[int | None] = []
    waiting = threading.Thread(target=lambda: woken.append(worker.wait()))
    waiting.start()
    try:
        time.sleep(0.05)
        assert woken == []
        worker.wake()
        waiting.join(5)
        assert woken == [None]
    finally:
        worker.unlink()
        worker.close()
        os.close(lock_fd)
    assert tree.worker_sockets() == []


def context_switches(task: Path) -> int:
    """Voluntary and involuntary context switches of one thread (/proc/<pid>/task/<tid>)."""
    status = (task / "status").read_text()
    fields = (line.partition(":") for line in status.splitlines())
    return sum(int(value) for name, _, value in fields if name.endswith("ctxt_switches"))


def settled_context_switches(task: Path, timeout_s: float = 5.0) -> int:
    """A thread's context switches once a fifth of a second passes without one: on a loaded
    machine the wake-up of the last scrape can come after the scrape has been answered."""
    deadline = time.monotonic() + timeout_s
    last = context_switches(task)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = context_switches(task)
        if now == last:
            break
        last = now
    return last


def process_context_switches(pid: int) -> int:
    return sum(context_switches(task) for task in Path(f"/proc/{pid}/task").iterdir())


# --- the exporter ----------------------------------------------------------------------------
@pytest.fixture
def exporter_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", "0")
    monkeypatch.setenv(exporter.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(exporter.TREE_ENV, raising=False)
    yield tmp_path


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {
        (
            sample.name,
            tuple(sorted((k, v) for k, v in sample.labels.items() if not k.startswith("otel_"))),
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_single_process_serves_what_the_stock_exporter_serves(exporter_env: Path) -> None:
    reader = McpTokensPrometheusReader()
    stock = CollectorRegistry()
    provider = MeterProvider(metric_readers=[reader, PrometheusMetricReader(registry=stock)])
    try:
        address = reader.address
        assert address is not None
        tree_path = Path(os.environ[exporter.TREE_ENV])
        assert tree_path.parent == exporter_env
        meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "1.0")
        meter.create_counter("mcp_tokens.overhead", unit="{token}").add(
            3, {"mcp_tokens.overhead.kind": "marked"}
        )
        meter.create_histogram("mcp_tokens.analysis.duration", unit="s").record(0.002)
        meter.create_gauge("mcp_tokens.tool.definition", unit="{token}").set(40, {"gen_ai.tool.name": "a"})
        with urllib.request.urlopen(f"http://127.0.0.1:{address[1]}/metrics", timeout=5) as response:
            assert response.read() == generate_latest(stock)
        assert list(tree_path.glob("w-*")) == []  # a process that serves writes no file
    finally:
        provider.shutdown()
    assert not tree_path.exists() and exporter.TREE_ENV not in os.environ


def test_a_taken_port_is_one_warning_that_names_the_setting(
    exporter_env: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = McpTokensPrometheusReader()
    first_provider = MeterProvider(metric_readers=[first])
    assert first.address is not None
    monkeypatch.delenv(exporter.TREE_ENV)
    monkeypatch.setenv("OTEL_EXPORTER_PROMETHEUS_PORT", str(first.address[1]))
    with caplog.at_level("WARNING"):
        second = McpTokensPrometheusReader()
    second_provider = MeterProvider(metric_readers=[second])
    try:
        warnings = [r for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 1 and warnings[0].exc_info is None
        assert "OTEL_EXPORTER_PROMETHEUS_PORT" in warnings[0].getMessage()
        assert second.address is None and os.environ[exporter.TREE_ENV] == ""
        assert len(list(exporter_env.iterdir())) == 1  # the second made no directory
    finally:
        second_provider.shutdown()
        first_provider.shutdown()


@pytest.fixture(params=["notify", "poll"])
def mechanism(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How workers learn of a scrape: notified on their sockets, or polling (as on Windows)."""
    if request.param == "poll":
        monkeypatch.setattr(notify, "AVAILABLE", False)
    elif not notify.AVAILABLE:
        pytest.skip("no AF_UNIX datagram sockets")
    return str(request.param)


Want = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scraped_until(port: int, want: Want, timeout_s: float = 20.0) -> Want:
    """The wanted samples of the first scrape that has them all (the last one, at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = scrape(port)
        if all(found.get(k) == v for k, v in want.items()) or time.monotonic() > deadline:
            return {k: found[k] for k in want if k in found}
        time.sleep(0.2)


@pytest.mark.skipif(not PROC.is_dir(), reason="reads /proc")
def test_a_worker_sleeps_until_a_scrape_and_its_counts_outlive_it(exporter_env: Path, mechanism: str) -> None:
    root = McpTokensPrometheusReader()
    root_provider = MeterProvider(metric_readers=[root])
    # A second reader of the tree is a worker, as in a process the root spawned.
    worker = McpTokensPrometheusReader()
    worker_provider = MeterProvider(metric_readers=[worker])
    worker_running = True
    try:
        assert root.address is not None and worker.address is None
        port = root.address[1]
        (thread,) = [thread for thread in threading.enumerate() if thread.name == "mcp-tokens-prometheus"]
        task = PROC / str(thread.native_id)
        worker_provider.get_meter("worker").create_counter("mcp_tokens.things").add(4)
        want: Want = {("mcp_tokens_things_total", ()): 4.0}
        assert scraped_until(port, want) == want
        before = settled_context_switches(task)
        time.sleep(1.0)
        quiet = context_switches(task) - before
        if mechanism == "notify":
            assert quiet == 0  # blocked in recv(): not one wake-up in a second without a scrape
            scrape(port)
            assert context_switches(task) > before  # and a scrape does wake it
        else:
            assert quiet >= 5  # ten polls a second
        worker_provider.shutdown()
        worker_running = False
        assert not thread.is_alive()
        tree = Path(os.environ[exporter.TREE_ENV])
        assert [path.suffix for path in tree.glob("w-*")] == [".db"]  # its socket's name has gone
        assert scraped_until(port, want) == want  # what it counted outlives it
        assert list(tree.glob("w-*")) == []  # folded into the root's archive
    finally:
        if worker_running:  # a failure above must not leave its thread to the next test
            worker_provider.shutdown()
        root_provider.shutdown()


def read_started(app: subprocess.Popen[str]) -> tuple[int, int]:
    """The fork app's endpoint port and its long-lived worker's pid."""
    assert app.stdout is not None
    lines = dict(app.stdout.readline().split() for _ in range(2))
    return int(lines["port"]), int(lines["worker"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_server_serves_every_workers_series_once(exporter_env: Path, mechanism: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    arguments = ["poll"] if mechanism == "poll" else []
    with subprocess.Popen(
        [sys.executable, "-m", "tests.unit.prometheus_fork_app", *arguments],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as app:
        try:
            port, worker_pid = read_started(app)
            want: Want = {
                ("mcp_tokens_things_total", ()): float(fork_app.BEFORE_FORK + sum(fork_app.WORKER_ADDS)),
                ("mcp_tokens_size_count", ()): 3.0,
                ("mcp_tokens_size_sum", ()): 56.0,
                ("mcp_tokens_size_bucket", (("le", "10"),)): 2.0,
                ("mcp_tokens_tool_definition", (("gen_ai_tool_name", "search"),)): fork_app.LISTING[1],
            }
            assert scraped_until(port, want) == want
            # Scraped again, the exited worker is folded in once and its file is gone.
            assert {k: scrape(port).get(k) for k in want} == want
            (tree,) = exporter_env.iterdir()
            assert len(list(tree.glob("w-*.db"))) == 1
            assert (tree / notify.ROOT_SOCKET).is_socket() == (mechanism == "notify")
            if mechanism == "notify" and PROC.is_dir():
                assert len(list(tree.glob("w-*.s"))) == 1  # the exited worker removed its name
                before = process_context_switches(worker_pid)
                time.sleep(1.0)
                assert process_context_switches(worker_pid) == before  # the whole worker sleeps
        finally:
            app.communicate("", timeout=20)
    assert app.returncode == 0
    assert list(exporter_env.iterdir()) == []
