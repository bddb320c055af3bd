"""`mcp_tokens_prometheus`: the merge rules, the shared directory, the worker files, and one
endpoint for a forked server (a real fork, in a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens import prometheus as exporter
from opentelemetry.exporter.mcp_tokens.prometheus import McpTokensPrometheusReader
from opentelemetry.exporter.mcp_tokens.prometheus.merge import Archive, ChangeClock, merge
from opentelemetry.exporter.mcp_tokens.prometheus.samples import Family, SampleKey, flatten, rebuild
from opentelemetry.exporter.mcp_tokens.prometheus.store import WorkerStore, read_generation, read_worker_file
from opentelemetry.exporter.mcp_tokens.prometheus.tree import PREFIX, TREE_LOCK, Tree, remove_stale
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
        store = WorkerStore(*tree.new_worker_file())
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
    _, worker_lock = busy.new_worker_file()
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


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_server_serves_every_workers_series_once(exporter_env: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with subprocess.Popen(
        [sys.executable, "-m", "tests.unit.prometheus_fork_app"],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as app:
        try:
            assert app.stdout is not None
            port = int(app.stdout.readline())
            want = {
                ("mcp_tokens_things_total", ()): float(fork_app.BEFORE_FORK + sum(fork_app.WORKER_ADDS)),
                ("mcp_tokens_size_count", ()): 3.0,
                ("mcp_tokens_size_sum", ()): 56.0,
                ("mcp_tokens_size_bucket", (("le", "10"),)): 2.0,
                ("mcp_tokens_tool_definition", (("gen_ai_tool_name", "search"),)): fork_app.LISTING[1],
            }
            deadline = time.monotonic() + 20
            while True:
                found = scrape(port)
                if all(found.get(k) == v for k, v in want.items()) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert {k: found.get(k) for k in want} == want
            # Scraped again, the exited worker is folded in once and its file is gone.
            assert {k: scrape(port).get(k) for k in want} == want
            (tree,) = exporter_env.iterdir()
            assert len(list(tree.glob("w-*.db"))) == 1
        finally:
            app.communicate("", timeout=20)
    assert app.returncode == 0
    assert list(exporter_env.iterdir()) == []
