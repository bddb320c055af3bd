# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What more counting processes buy: `python -m tests.bench.counting`.

The counting service forks `COUNTER_PROCESSES` counting processes from the one that loaded
the tokenizer. Four clients (each its own connection, as four instrumented processes
would have) hand it a backlog of tools/call results of 50 KB of JSON records at once; the
table gives, for one and for two counting processes taking turns, the median time to
count the whole backlog, the rate, and the service's PSS (shared pages split, so the
tokenizer's tables count once). The floor: the service never costs more than 30 MB per
added process (copy-on-write keeps the tables shared).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting.client import ServiceLink
from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side

from ._doc import add_markdown_option, publish, table
from .engine import json_payload
from .footprint import service_pids, total_mb

CLIENTS = 4
JOBS = 60  # per client
SIZE = 50_000
ROUNDS = 3
MAX_ADDED_MB = 30.0


def backlog(client: int) -> list[Exchange]:
    text = json_payload(SIZE)[:SIZE]
    exchanges = []
    for index in range(JOBS):
        exchange = Exchange(Side.SERVER, "tools/call", target="records", server_name="bench")
        exchange.request = {"name": "records", "arguments": {"page": index}}
        exchange.finish({"content": [{"type": "text", "text": f"{client:04d}{index:08d}{text[12:]}"}]})
        exchanges.append(exchange)
    return exchanges


def drain(processes: int, directory: Path) -> tuple[float, float]:
    """Seconds to count every client's backlog, and the service's PSS in MB afterwards."""
    settings = Settings(counter_dir=str(directory), counter_processes=processes, counter_idle_timeout=60)
    links = [ServiceLink(settings, Options(), 60) for _ in range(CLIENTS)]
    while any(link.status is None for link in links):  # every counting process forked and ready
        for link in links:
            link.receive()
        time.sleep(0.01)
    backlogs = [backlog(client) for client in range(CLIENTS)]
    started = time.monotonic()

    def client(link: ServiceLink, exchanges: list[Exchange]) -> None:
        for seq, exchange in enumerate(exchanges):
            link.send(exchange, seq, False)
        answered = 0
        while answered < len(exchanges):
            link.flush()
            answered += len(link.receive())
            time.sleep(0.002)

    threads = [threading.Thread(target=client, args=pair) for pair in zip(links, backlogs, strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    memory = total_mb(service_pids(directory))
    for link in links:
        link.close()
    for pid in service_pids(directory):
        with contextlib.suppress(OSError):
            os.kill(pid, 15)
    while service_pids(directory):
        time.sleep(0.05)
    return elapsed, memory


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_markdown_option(parser)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="mct-counting-"))
    results: dict[int, list[tuple[float, float]]] = {1: [], 2: []}
    try:
        for round_index in range(ROUNDS):
            for processes in (1, 2) if round_index % 2 == 0 else (2, 1):
                results[processes].append(drain(processes, base / f"c{round_index}{processes}"))
                print(f"{processes} process(es): {results[processes][-1][0]:.2f} s", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    megabytes = CLIENTS * JOBS * SIZE / 1e6
    rows = []
    for processes, runs in results.items():
        seconds = statistics.median(elapsed for elapsed, _ in runs)
        memory = statistics.median(mb for _, mb in runs)
        rows.append([str(processes), f"{seconds:.2f}", f"{megabytes / seconds:.1f}", f"{memory:.0f}"])
    added = float(rows[1][3]) - float(rows[0][3])
    body = (
        f"{CLIENTS} clients, {JOBS} results of {SIZE // 1000} KB each, counted at once:\n\n"
        + table(["counting processes", "seconds (median)", "MB/s", "service PSS, MB"], rows)
        + f"\n\nThe second process: {float(rows[0][1]) / float(rows[1][1]):.2f}x the rate, "
        + f"{added:+.0f} MB (bound {MAX_ADDED_MB:.0f})."
    )
    publish(body, args.markdown, "counting-processes", "tests.bench.counting")
    return 0 if added <= MAX_ADDED_MB else 1


if __name__ == "__main__":
    raise SystemExit(main())
