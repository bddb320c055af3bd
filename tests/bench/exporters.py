"""What the deployment exporters cost, per scrape or push, in CPU time (best of several runs):

- `mcp_tokens_prometheus`, a worker's flush: collect its series, stamp them, write the ones that
  changed to its file (all of them the first time, a tenth afterwards);
- `mcp_tokens_prometheus`, the root's merge: read every worker's file and build the page;
- the stock `prometheus` exporter's page for the same series in one process, for comparison;
- `mcp_tokens_remote_write`: encode one snapshot as a WriteRequest, and snappy-compress it.

    python -m tests.bench.exporters            # 2,000 series, 4 workers
    python -m tests.bench.exporters --short    # a quick check that it runs
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from opentelemetry.exporter.mcp_tokens.prometheus.merge import ChangeClock, merge
from opentelemetry.exporter.mcp_tokens.prometheus.samples import flatten, rebuild
from opentelemetry.exporter.mcp_tokens.prometheus.store import KeyCache, WorkerStore, read_worker_file
from opentelemetry.exporter.mcp_tokens.prometheus.tree import Tree
from opentelemetry.exporter.mcp_tokens.remote_write import encode, snappy
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest

from tests.bench._doc import add_markdown_option, table, write_section
from tests.bench._timing import best_cpu_seconds_each


def recorded(series: int) -> tuple[CollectorRegistry, MeterProvider]:
    """A stock Prometheus registry holding about `series` samples of mcp-tokens' shapes."""
    registry = CollectorRegistry()
    provider = MeterProvider(
        metric_readers=[PrometheusMetricReader(registry=registry)], resource=Resource.create()
    )
    meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "0.1.0")
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
    return registry, provider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--short", action="store_true", help="200 series, 2 workers, 2 runs")
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    if args.short:
        args.series, args.workers, args.repeat = 200, 2, 2
    registry, provider = recorded(args.series)
    _, values = flatten(registry.collect())
    with tempfile.TemporaryDirectory() as base:
        tree, lock_fd = Tree.create(Path(base))
        stores = [WorkerStore(*tree.new_worker_file()) for _ in range(args.workers)]
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
    if args.markdown:
        rows = [[label, f"{spent * 1000:.2f}"] for label, spent in zip(labels, seconds, strict=True)]
        body = (
            f"{len(values)} samples, {args.workers} workers; snappy compresses "
            f"{len(snapshot) / seconds[4] / 1e6:.1f} MB/s at a ratio of {len(snapshot) / compressed:.1f}.\n\n"
            + table(["step", "CPU ms"], rows)
        )
        write_section(args.markdown, "exporters", body, "tests.bench.exporters", argv)
    return 0


def generate_latest_of(families: list[object]) -> bytes:
    class Page:
        def collect(self) -> list[object]:
            return families

    page = CollectorRegistry()
    page.register(Page())  # type: ignore[arg-type]
    return generate_latest(page)


if __name__ == "__main__":
    raise SystemExit(main())
