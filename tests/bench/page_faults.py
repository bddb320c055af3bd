# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Minor page faults per tool call, uninstrumented against instrumented:
`python -m tests.bench.page_faults` (Linux).

The worker keeps an exchange's payloads until calls stop (worker.py), so in back-to-back
calls each next result is allocated on fresh memory, and every fresh 4 KB page faults in on
the call's path. Fault counts do not depend on how noisy the machine is, which call times
do. Blocks of `--calls` back-to-back calls alternate U,I and I,U; for each block this
prints the faults per timed call of the client process (`getrusage`) and, over stdio, of
the server subprocess (`/proc/<pid>/stat`; a new server every block, as in
`tests.bench.instrumented`), and the median call time. First it prints what a fault costs
here: making a 1 MB string whose memory is reused, against one whose memory is fresh
because the strings made before it are kept.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import os
import resource
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._clients import SERVER_MODULE, TRANSPORTS, variant_session
from ._doc import add_markdown_option, table, write_section
from .instrumented import SIZES, prepare_payloads
from .instrumented_server import PAYLOAD_TOOL, BenchTelemetry, build_server

WARMUP_CALLS = 3
FRESH_PROBES = 200


def server_faults() -> int | None:
    """Minor faults so far of this process's benchmark server child; None if there is none."""
    for children in glob.glob(f"/proc/{os.getpid()}/task/*/children"):
        for pid in Path(children).read_text().split():
            try:
                if SERVER_MODULE in Path(f"/proc/{pid}/cmdline").read_text():
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    return int(fields[7])  # minflt: field 10 of stat, the 8th after the name
            except OSError:
                continue
    return None


def own_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def fresh_memory_cost_ms(size: int = 1 << 20) -> tuple[float, float, float]:
    """(median ms to make a `size`-character string that reuses freed memory, the same when
    the earlier ones are kept (fresh memory), faults per kept string)."""
    base = "x" * size

    def make_many(keep: bool) -> tuple[float, float]:
        kept: list[str] = []
        times = []
        faults = own_faults()
        for serial in range(FRESH_PROBES):
            started = time.perf_counter()
            text = f"{serial:012d}{base[12:]}"  # a new string, as each tool call returns
            times.append(time.perf_counter() - started)
            if keep:
                kept.append(text)
        return 1e3 * statistics.median(times), (own_faults() - faults) / FRESH_PROBES

    make_many(keep=False)  # the reused memory, faulted in once
    reused_ms, _ = make_many(keep=False)
    fresh_ms, faults = make_many(keep=True)
    return reused_ms, fresh_ms, faults


@dataclass
class Setup:
    transport: str
    size: int
    calls: int
    payload_dir: Path
    telemetry: BenchTelemetry
    memory_server: Any


async def block(setup: Setup, instrumented: bool) -> tuple[float, float | None, float]:
    """(client faults per call, server faults per call or None, median call ms)."""
    async with variant_session(
        setup.transport,
        instrumented=instrumented,
        telemetry=setup.telemetry,
        payload_dir=setup.payload_dir,
        memory_server=setup.memory_server,
        log_path=setup.payload_dir / "server.log",
    ) as call:
        arguments = {"size": setup.size}
        for _ in range(WARMUP_CALLS):
            await call(PAYLOAD_TOOL, arguments)
        client_before, server_before = own_faults(), server_faults()
        times = []
        for _ in range(setup.calls):
            started = time.perf_counter()
            await call(PAYLOAD_TOOL, arguments)
            times.append(time.perf_counter() - started)
        client = (own_faults() - client_before) / setup.calls
        server_after = server_faults()
        server = None
        if server_before is not None and server_after is not None:
            server = (server_after - server_before) / setup.calls
    return client, server, 1e3 * statistics.median(times)


async def run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as directory:
        payload_dir = Path(directory)
        size = SIZES[args.size]
        prepare_payloads(payload_dir, [size])
        setup = Setup(
            args.transport, size, args.calls, payload_dir, BenchTelemetry(), build_server(payload_dir, None)
        )
        reused_ms, fresh_ms, faults = fresh_memory_cost_ms()
        fresh = (
            f"a new 1 MiB string: {reused_ms:.3f} ms on reused memory, {fresh_ms:.3f} ms on fresh"
            f" memory ({faults:.0f} faults)"
        )
        print(fresh)
        print(f"{args.size} results over {args.transport}, blocks of {args.calls} calls back to back")
        print("block  variant  client faults/call  server faults/call  median ms")
        rows = []
        for index in range(args.blocks):
            order = (False, True) if index % 2 == 0 else (True, False)
            for instrumented in order:
                gc.collect()
                client, server, median = await block(setup, instrumented)
                shown = "-" if server is None else f"{server:.0f}"
                variant = "I" if instrumented else "U"
                print(f"{index + 1:5d}  {variant:7s}  {client:18.0f}  {shown:>18s}  {median:9.2f}")
                rows.append([index + 1, variant, f"{client:.0f}", shown, f"{median:.2f}"])
    if args.markdown:
        header = ["block", "variant", "client faults/call", "server faults/call", "median ms"]
        body = f"{fresh[0].upper()}{fresh[1:]}.\n\n" + table(header, rows, [True, False, True, True, True])
        section = f"page-faults-{args.transport}"
        write_section(args.markdown, section, body, "tests.bench.page_faults")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--size", choices=list(SIZES), default="1 MB")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--calls", type=int, default=30)
    add_markdown_option(parser)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
