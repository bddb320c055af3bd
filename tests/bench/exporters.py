# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the deployment exporters cost, per scrape or push, in CPU time (best of several runs):

- `mcp_tokens_prometheus`, a worker's flush: collect its series, stamp them, write the ones that
  changed to its file (all of them the first time, a tenth afterwards);
- `mcp_tokens_prometheus`, the root's merge: read every worker's file and build the page;
- the stock `prometheus` exporter's page for the same series in one process, for comparison;
- `mcp_tokens_remote_write`: encode one snapshot as a WriteRequest, and snappy-compress it.

Then, side by side, two real forked servers of `mcp_tokens_prometheus` with the same workers
and series, one whose workers are notified of a scrape on their sockets and one whose workers
poll (the fallback where AF_UNIX datagrams are missing): the median latency of a scrape of the
endpoint (the scrapes take turns), their ratio, and (Linux) how often each server's processes
wake up between scrapes. Twice: with a few series per worker (`--few-series`), where a scrape
is mostly the wait the mechanism decides, and with `--series`, where it is mostly the flush and
merge both pay. Fails (exit status 1) when, with a few series, the notified median is not below
`--max-latency-ratio` times the polled one.

    python -m tests.bench.exporters            # 2,000 series, 4 workers
    python -m tests.bench.exporters --short    # a quick check that it runs
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.exporter.mcp_tokens.prometheus import DIR_ENV, McpTokensPrometheusReader, notify
from opentelemetry.exporter.mcp_tokens.prometheus.merge import ChangeClock, merge
from opentelemetry.exporter.mcp_tokens.prometheus.samples import flatten, rebuild
from opentelemetry.exporter.mcp_tokens.prometheus.store import KeyCache, WorkerStore, read_worker_file
from opentelemetry.exporter.mcp_tokens.prometheus.tree import Tree, worker_token
from opentelemetry.exporter.mcp_tokens.remote_write import encode, snappy
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest

from tests.bench._doc import add_markdown_option, table, write_section
from tests.bench._timing import best_cpu_seconds_each

REPO = Path(__file__).resolve().parents[2]
MECHANISMS = ("notify", "poll")
WARM_UP_SCRAPES = 3


def recorded(series: int) -> tuple[CollectorRegistry, MeterProvider]:
    """A stock Prometheus registry holding about `series` samples of mcp-tokens' shapes."""
    registry = CollectorRegistry()
    provider = MeterProvider(
        metric_readers=[PrometheusMetricReader(registry=registry)], resource=Resource.create()
    )
    record(provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "0.1.0"), series)
    return registry, provider


def record(meter: Meter, series: int) -> None:
    """About `series` samples of mcp-tokens' shapes."""
    payload = meter.create_histogram(
        "mcp_tokens.payload", unit="{token}", explicit_bucket_boundaries_advisory=[1, 16, 256, 4096, 65536]
    )
    overhead = meter.create_counter("mcp_tokens.overhead", unit="{token}")
    definition = meter.create_gauge("mcp_tokens.tool.definition", unit="{token}")
    tools = max(1, series // 10)  # a histogram is 9 samples, plus one counter per tool
    for tool in range(tools):
        attributes = {
            "gen_ai.tool.name": f"tool_{tool}",
            "mcp_tokens.server.name": "shop",
            "mcp_tokens.side": "server",
        }
        payload.record(100 + tool, attributes)
        overhead.add(tool, {**attributes, "mcp_tokens.overhead.kind": "formatting"})
        definition.set(40 + tool, attributes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--scrapes", type=int, default=40, help="timed scrapes of each server")
    parser.add_argument("--quiet-seconds", type=float, default=2.0, help="how long wake-ups are counted")
    parser.add_argument(
        "--few-series", type=int, default=20, help="series per worker of the bounded latency comparison"
    )
    parser.add_argument("--max-latency-ratio", type=float, default=0.5)
    parser.add_argument("--short", action="store_true", help="200 series, 2 workers, 2 runs, 5 scrapes")
    parser.add_argument("--serve", choices=MECHANISMS, help=argparse.SUPPRESS)  # one server (a child)
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    if args.short:
        args.series, args.workers, args.repeat, args.scrapes, args.quiet_seconds = 200, 2, 2, 5, 0.5
    if args.serve:
        return serve(args.serve, args.workers, args.series)
    costs = cpu_costs(args)
    within, mechanism = scrape_latency(args, args.few_series, args.max_latency_ratio)
    _, full = scrape_latency(args, args.series, None)
    if args.markdown:
        write_section(
            args.markdown, "exporters", f"{costs}\n\n{mechanism}\n\n{full}", "tests.bench.exporters", argv
        )
    return 0 if within else 1


def cpu_costs(args: argparse.Namespace) -> str:
    """Prints the CPU costs; returns them as markdown."""
    registry, provider = recorded(args.series)
    _, values = flatten(registry.collect())
    with tempfile.TemporaryDirectory() as base:
        tree, lock_fd = Tree.create(Path(base))
        stores = [WorkerStore(*tree.new_worker_file(worker_token())) for _ in range(args.workers)]
        clock = ChangeClock()
        for store in stores:
            store.write(clock.stamp(values), generation=1)
        tenth = dict(list(values.items())[: max(1, len(values) // 10)])
        generation = [1]

        def worker_flush() -> None:
            generation[0] += 1
            changed = {key: value + generation[0] for key, value in tenth.items()}
            _, collected = flatten(registry.collect())
            stores[0].write(clock.stamp({**collected, **changed}), generation[0])

        keys = KeyCache()

        def root_merge() -> None:
            sources = [read_worker_file(path, keys)[0] for path in tree.worker_files()]
            generate_latest_of(rebuild(merge(sources)))

        def stock_page() -> None:
            generate_latest(registry)

        snapshot = encode(values, Resource.create({"service.name": "shop"}), 1_700_000_000_000)

        def remote_write_encode() -> None:
            encode(values, Resource.create({"service.name": "shop"}), 1_700_000_000_000)

        def remote_write_compress() -> None:
            snappy.compress(snapshot)

        runs = [worker_flush, root_merge, stock_page, remote_write_encode, remote_write_compress]
        seconds = best_cpu_seconds_each(runs, args.repeat)
        for store in stores:
            store.close()
        os.close(lock_fd)
    provider.shutdown()
    print(f"{len(values)} samples, {args.workers} workers (CPU ms, best of {args.repeat})")
    labels = (
        "worker flush (a tenth changed)",
        f"root merge of {args.workers} files",
        "stock exporter page, one process",
        "remote write: encode",
        f"remote write: snappy ({len(snapshot) / 1e6:.2f} MB in)",
    )
    for label, spent in zip(labels, seconds, strict=True):
        print(f"  {label:<40} {spent * 1000:8.2f}")
    compressed = len(snappy.compress(snapshot))
    print(f"  snappy: {len(snapshot) / seconds[4] / 1e6:.1f} MB/s, ratio {len(snapshot) / compressed:.1f}")
    rows = [[label, f"{spent * 1000:.2f}"] for label, spent in zip(labels, seconds, strict=True)]
    return (
        f"{len(values)} samples, {args.workers} workers; snappy compresses "
        f"{len(snapshot) / seconds[4] / 1e6:.1f} MB/s at a ratio of {len(snapshot) / compressed:.1f}.\n\n"
        + table(["step", "CPU ms"], rows)
    )


# --- scrape latency and wake-ups: notified and polling workers, side by side ------------------
def serve(mechanism: str, workers: int, series: int) -> int:
    """A pre-forking server in miniature: the root forks `workers` workers, each records `series`
    samples; prints `port` and `workers` lines, then serves until stdin closes."""
    if mechanism == "poll":
        notify.AVAILABLE = False  # as where AF_UNIX datagrams are missing
    reader = McpTokensPrometheusReader()
    provider = MeterProvider(metric_readers=[reader], resource=Resource.create())
    meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "0.1.0")
    children = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:
            record(meter, series)
            sys.stdin.read()
            provider.shutdown()
            os._exit(0)
        children.append(pid)
    address = reader.address
    if address is None:
        return 1
    print("port", address[1], flush=True)
    print("workers", *children, flush=True)
    sys.stdin.read()
    for pid in children:
        os.waitpid(pid, 0)
    provider.shutdown()
    return 0


@dataclass
class Server:
    mechanism: str
    process: subprocess.Popen[str]
    port: int
    workers: list[int]

    def scrape(self) -> float:
        """Seconds one scrape of the endpoint takes."""
        started = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=10) as response:
            response.read()
        return time.perf_counter() - started


@contextmanager
def running_server(mechanism: str, args: argparse.Namespace, series: int) -> Iterator[Server]:
    with tempfile.TemporaryDirectory(prefix="mt-") as base:
        env = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
            "OTEL_EXPORTER_PROMETHEUS_PORT": "0",
            DIR_ENV: base,
        }
        command = [sys.executable, "-m", "tests.bench.exporters", "--serve", mechanism]
        command += ["--workers", str(args.workers), "--series", str(series)]
        with subprocess.Popen(
            command, cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        ) as process:
            try:
                assert process.stdout is not None
                lines = dict(process.stdout.readline().split(maxsplit=1) for _ in range(2))
                workers = [int(pid) for pid in lines["workers"].split()]
                yield Server(mechanism, process, int(lines["port"]), workers)
            finally:
                process.communicate("", timeout=30)


def wake_ups_per_second(pids: list[int], seconds: float) -> float | None:
    """Context switches per second of every thread of `pids` (None without /proc)."""

    def switches() -> int:
        total = 0
        for pid in pids:
            for task in Path(f"/proc/{pid}/task").iterdir():
                for line in (task / "status").read_text().splitlines():
                    name, _, value = line.partition(":")
                    if name.endswith("ctxt_switches"):
                        total += int(value)
        return total

    if not Path("/proc/self/task").is_dir():
        return None
    before = switches()
    time.sleep(seconds)
    return (switches() - before) / seconds


def scrape_latency(args: argparse.Namespace, series: int, bound: float | None) -> tuple[bool, str]:
    """Prints the latencies and wake-ups of servers whose workers hold `series` series each;
    returns whether the ratio is within `bound` (None: not bounded), and the results as markdown.

    With a few series a scrape is mostly the wait for the workers' files, which is what the
    mechanism decides; with many it is mostly the workers' flush and the root's merge, the
    same CPU for both (their own rows above), so there the ratio is reported, not bounded."""
    with ExitStack() as stack:
        servers = [stack.enter_context(running_server(mechanism, args, series)) for mechanism in MECHANISMS]
        for server in servers:
            for _ in range(WARM_UP_SCRAPES):  # every worker has written its file
                server.scrape()
        latencies: dict[str, list[float]] = {server.mechanism: [] for server in servers}
        for turn in range(args.scrapes):
            for server in servers if turn % 2 == 0 else reversed(servers):
                latencies[server.mechanism].append(server.scrape())
        wake_ups = {
            server.mechanism: (
                wake_ups_per_second(server.workers, args.quiet_seconds),
                wake_ups_per_second([server.process.pid], args.quiet_seconds),
            )
            for server in servers
        }
    medians = {mechanism: statistics.median(seconds) for mechanism, seconds in latencies.items()}
    ratio = medians["notify"] / medians["poll"]
    rows = []
    for mechanism, label in (("notify", "notified (sockets)"), ("poll", "polling (fallback)")):
        workers, root = wake_ups[mechanism]
        per_worker = "n/a" if workers is None else f"{workers / args.workers:.1f}"
        rows.append(
            [label, f"{medians[mechanism] * 1000:.2f}", per_worker, "n/a" if root is None else f"{root:.1f}"]
        )
    header = ["workers", "median scrape ms", "wake-ups/s per worker", "wake-ups/s root"]
    verdict = "not bounded" if bound is None else f"bound {bound:g}"
    summary = (
        f"Scrapes of {args.workers} forked workers holding about {series:,} series each, median of "
        f"{args.scrapes} each, taking turns; wake-ups (context switches) counted over "
        f"{args.quiet_seconds:g} s without a scrape. Ratio notified/polling {ratio:.3f} ({verdict})."
    )
    print(f"\n{summary}")
    for row in rows:
        print(f"  {row[0]:<20} {row[1]:>9} ms   wake-ups/s: per worker {row[2]:>5}, root {row[3]:>5}")
    return bound is None or ratio <= bound, f"{summary}\n\n" + table(header, rows)


def generate_latest_of(families: list[object]) -> bytes:
    class Page:
        def collect(self) -> list[object]:
            return families

    page = CollectorRegistry()
    page.register(Page())  # type: ignore[arg-type]
    return generate_latest(page)


if __name__ == "__main__":
    raise SystemExit(main())
