# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A pre-forking server in miniature, for tests/unit/test_prometheus_exporter.py: the parent
serves `mcp_tokens_prometheus` and records before it forks two workers; each worker records
its own values. Worker 0 exits at once (its counts must outlive it); worker 1 sets the listing
gauge a moment later and stays until stdin closes. Prints `port <endpoint's port>` and
`worker <worker 1's pid>` (in either order), then waits.

    python -m tests.unit.prometheus_fork_app      # env: OTEL_EXPORTER_PROMETHEUS_HOST/PORT, ..._DIR
    python -m tests.unit.prometheus_fork_app poll # as where notifications are missing: workers poll
"""

from __future__ import annotations

import os
import sys
import time

from opentelemetry.exporter.mcp_tokens.prometheus import McpTokensPrometheusReader, notify
from opentelemetry.sdk.metrics import MeterProvider

BEFORE_FORK = 5
WORKER_ADDS = (10, 20)
LISTING = (100.0, 101.0)


def main() -> None:
    if sys.argv[1:] == ["poll"]:
        notify.AVAILABLE = False
    reader = McpTokensPrometheusReader()
    provider = MeterProvider(metric_readers=[reader])
    meter = provider.get_meter("fork-app", "1")
    things = meter.create_counter("mcp_tokens.things", unit="{thing}")
    sizes = meter.create_histogram(
        "mcp_tokens.size", unit="{token}", explicit_bucket_boundaries_advisory=[1, 10]
    )
    listing = meter.create_gauge("mcp_tokens.tool.definition", unit="{token}")
    things.add(BEFORE_FORK)
    sizes.record(50)
    for worker, amount in enumerate(WORKER_ADDS):
        if os.fork() == 0:
            run_worker(worker, amount, provider, things, sizes, listing)
    address = reader.address
    assert address is not None
    print("port", address[1], flush=True)
    sys.stdin.read()
    provider.shutdown()


def run_worker(worker: int, amount: int, provider: MeterProvider, *instruments: object) -> None:
    things, sizes, listing = instruments
    things.add(amount)  # type: ignore[attr-defined]
    sizes.record(3)  # type: ignore[attr-defined]
    if worker == 0:
        listing.set(LISTING[0], {"gen_ai.tool.name": "search"})  # type: ignore[attr-defined]
        provider.shutdown()
        os._exit(0)
    time.sleep(0.3)
    listing.set(LISTING[1], {"gen_ai.tool.name": "search"})  # type: ignore[attr-defined]
    print("worker", os.getpid(), flush=True)
    sys.stdin.read()
    provider.shutdown()
    os._exit(0)


if __name__ == "__main__":
    main()
