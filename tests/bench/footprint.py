# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What mcp-tokens costs in memory: `python -m tests.bench.footprint`.

Memory is PSS summed over every process involved: each page shared by several processes
(copy-on-write after a fork, the same file mapped twice) is split among them, so the sum
counts it once. Each deployment runs in four variants, one after another:

- plain: no OpenTelemetry at all;
- OpenTelemetry: under `opentelemetry-instrument`, mcp-tokens disabled, no exporter;
- mcp-tokens: under `opentelemetry-instrument` with mcp-tokens and `mcp_tokens_prometheus`;
- mcp-tokens with the guard: the same, `GUARD=truncate`.

Deployments: `gunicorn -k uvicorn_worker.UvicornWorker -w 4` serving stateless streamable
HTTP (`tests.e2e.workers_app`), and four stdio servers (`examples.demo_server --stdio`), one
client each, as desktop hosts run them. Each is driven with every demo tool until every
worker has answered, then, once its counts have settled, the PSS of the server's process
tree and of the counting service (its own directory, started by the deployment) is summed.

"Added" is mcp-tokens over OpenTelemetry alone: what this package costs. The bounds:
gunicorn -w 4 at most 100 MB added, the guard at most 15 MB more, four stdio servers at
most 110 MB added.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from examples import demo_content
from examples.demo_client import MCP_MAJOR, DemoSession, connect
from examples.processes import HOST, REPO_ROOT, Child, child_env, free_port, launcher

from ._doc import add_markdown_option, publish, table

VARIANTS = ("plain", "OpenTelemetry", "mcp-tokens", "mcp-tokens + guard")
WORKERS = 4
STDIO_SERVERS = 4
BOUNDS_MB = {"gunicorn": 100.0, "guard": 15.0, "stdio": 110.0}
COUNTER_DIR = "OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR"
STARTUP_TIMEOUT_S = 60.0
SETTLE_S = 15.0  # at most, after the last call: counts sent, answered and recorded
MAX_PID_CALLS = 200


def pss_kb(pid: int) -> int:
    """The process's proportional set size (Linux smaps_rollup), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pending.extend(int(child) for child in children.read_text().split())
    return found


def service_pids(directory: Path) -> list[int]:
    needle = os.fsencode(directory)
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if needle in command and b"counting.service" in command:
                    pids.append(int(entry.name))
    return pids


def cpu_s(pid: int) -> float:
    """User and system CPU of the process `pid` (all its threads) so far; 0 once it is gone."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        return _cpu_ticks(Path(f"/proc/{pid}/stat")) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _cpu_ticks(stat: Path) -> int:
    """utime + stime of a /proc `stat` file (a process's, or a thread's under task/)."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def threads_named(pid: int, name: str) -> list[Path]:
    """The /proc directories of the threads of `pid` that the kernel names `name` (Linux)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            if (task / "comm").read_text().strip() == name:
                found.append(task)
    return found


def threads_cpu_s(pids: list[int], name: str) -> float:
    """User and system CPU so far of the threads of `pids` that the kernel names `name`."""
    total = 0
    for task in (task for pid in pids for task in threads_named(pid, name)):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += _cpu_ticks(task / "stat")
    return total / os.sysconf("SC_CLK_TCK")


def threads_switches(pid: int, name: str) -> int | None:
    """Voluntary context switches so far of the threads of `pid` that the kernel names
    `name`; None where none is found."""
    found = None
    for task in threads_named(pid, name):
        with contextlib.suppress(OSError, ValueError, IndexError):
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    found = (found or 0) + int(line.split(":")[1])
    return found


def service_cpu_s(directory: Path) -> float | None:
    """The CPU time of the counting service serving `directory` so far, each of its processes
    once (its counting processes are its children, and found by name too); None where none runs."""
    pids = service_pids(directory)
    return sum(cpu_s(pid) for pid in pids) if pids else None


def total_mb(pids: list[int]) -> float:
    return sum(pss_kb(pid) for pid in set(pids)) / 1024


def settled_mb(processes: Callable[[], list[int]]) -> float:
    """The processes' PSS once it holds still (a process that just started may still be
    freeing what it built): two readings 0.5 s apart within 1 MB, for at most `SETTLE_S`."""
    deadline = time.monotonic() + SETTLE_S
    last = total_mb(processes())
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = total_mb(processes())
        if abs(now - last) < 1.0:
            return now
        last = now
    return last


@dataclass(frozen=True)
class Variant:
    name: str
    launcher_args: tuple[str, ...]
    env: dict[str, str]


def variant(name: str, counter_dir: Path, exporter: str) -> Variant:
    """`exporter`: the metrics exporter of the mcp-tokens variants (a port is free for it)."""
    if name == "plain":
        return Variant(name, (), {COUNTER_DIR: str(counter_dir)})
    quiet = ("--traces_exporter", "none", "--logs_exporter", "none")
    if name == "OpenTelemetry":
        disabled = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "mcp_tokens", COUNTER_DIR: str(counter_dir)}
        return Variant(name, (*quiet, "--metrics_exporter", "none"), disabled)
    env = {COUNTER_DIR: str(counter_dir), "OTEL_EXPORTER_PROMETHEUS_HOST": HOST}
    if exporter == "mcp_tokens_prometheus":
        env["OTEL_EXPORTER_PROMETHEUS_PORT"] = str(free_port())
    if name.endswith("guard"):
        env["OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD"] = "truncate"
    return Variant(name, (*quiet, "--metrics_exporter", exporter), env)


def command(chosen: Variant, argv: list[str]) -> list[str]:
    if chosen.name == "plain":
        return argv
    return [launcher(), *chosen.launcher_args, *argv]


async def call_every_tool(session: Any) -> None:
    for tool in demo_content.TOOLS:
        await session.call_tool(tool.name, tool.arguments[0])


# --- gunicorn -w 4 ---------------------------------------------------------------------------
def gunicorn_mb(chosen: Variant, workdir: Path) -> float:
    port, counter_dir = free_port(), Path(chosen.env[COUNTER_DIR])
    script = Path(sys.executable).with_name("gunicorn")
    argv = [str(script), "-k", "uvicorn_worker.UvicornWorker", "-w", str(WORKERS), "-b", f"{HOST}:{port}"]
    argv.append("tests.e2e.workers_app:app")
    log = workdir / f"gunicorn-{chosen.name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command(chosen, argv), cwd=REPO_ROOT, env=child_env(chosen.env), stdout=out, stderr=out
        )
    child = Child(f"gunicorn ({chosen.name})", process, log, (port,))
    try:
        child.wait_ready(STARTUP_TIMEOUT_S)
        anyio.run(drive_workers, f"http://{HOST}:{port}/mcp")
        time.sleep(1.0)  # the last counts sent and recorded
        return settled_mb(lambda: tree(process.pid) + service_pids(counter_dir))
    finally:
        child.stop()
        stop_service(counter_dir)


async def drive_workers(url: str) -> None:
    """Every tool on every worker: calls on new connections until each worker has answered."""
    seen: set[str] = set()
    for _ in range(MAX_PID_CALLS):
        async with connect(url) as session:
            result = await session.call_tool("worker_pid", {})
            pid = (result or {}).get("content", [{}])[0].get("text", "")
            if pid not in seen:
                seen.add(pid)
                await call_every_tool(session)
        if len(seen) >= WORKERS:
            return
    raise RuntimeError(f"only {len(seen)} of {WORKERS} workers answered")


# --- four stdio servers --------------------------------------------------------------------------
def stdio_mb(chosen: Variant, workdir: Path) -> float:
    measured: list[float] = []
    try:
        anyio.run(run_stdio_servers, chosen, workdir, measured)
    finally:
        stop_service(Path(chosen.env[COUNTER_DIR]))
    return measured[0]


async def run_stdio_servers(chosen: Variant, workdir: Path, measured: list[float]) -> None:
    full = command(chosen, [sys.executable, "-m", "examples.demo_server", "--stdio"])
    params = StdioServerParameters(
        command=full[0], args=full[1:], env=child_env(chosen.env), cwd=str(REPO_ROOT)
    )
    with (workdir / f"stdio-{chosen.name}.log").open("a", encoding="utf-8") as errlog:
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(STDIO_SERVERS):
                session = await stack.enter_async_context(_stdio_session(params, errlog))
                await call_every_tool(session)
            await anyio.sleep(1.0)  # the last counts sent and recorded
            counter_dir = Path(chosen.env[COUNTER_DIR])
            measured.append(
                await anyio.to_thread.run_sync(
                    settled_mb,
                    lambda: [p for p in tree(os.getpid()) if p != os.getpid()] + service_pids(counter_dir),
                )
            )


@contextlib.asynccontextmanager
async def _stdio_session(params: StdioServerParameters, errlog: Any) -> AsyncIterator[DemoSession]:
    if MCP_MAJOR >= 2:
        from mcp import Client  # noqa: PLC0415 -- mcp 2.x only

        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield DemoSession(client, v2=True)
        return
    async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield DemoSession(session, v2=False)


def stop_service(directory: Path) -> None:
    for pid in service_pids(directory):
        with contextlib.suppress(OSError):
            os.kill(pid, 15)


@contextlib.contextmanager
def own_counting_service(prefix: str) -> Iterator[Path]:
    """A counting-service directory of this benchmark's own, not the user's, named in the
    environment for everything this process and its children instrument; the service
    started there is stopped at the end. Yields the temporary directory that holds it."""
    variable = "OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR"
    previous = os.environ.get(variable)
    with tempfile.TemporaryDirectory(prefix=prefix) as directory:
        counter_dir = Path(directory) / "counter"
        os.environ[variable] = str(counter_dir)
        try:
            yield Path(directory)
        finally:
            stop_service(counter_dir)
            if previous is None:
                os.environ.pop(variable, None)
            else:
                os.environ[variable] = previous


@contextlib.contextmanager
def workspace() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="mct-footprint-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def measure() -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {"gunicorn": {}, "stdio": {}}
    with workspace() as workdir:
        for index, name in enumerate(VARIANTS):
            # One endpoint for a server's workers; four stdio servers would fight over one port,
            # so they keep their counts in process (as a desktop host's servers, unscraped, do).
            http = variant(name, workdir / f"counter-http-{index}", "mcp_tokens_prometheus")
            stdio = variant(name, workdir / f"counter-stdio-{index}", "none")
            results["gunicorn"][name] = gunicorn_mb(http, workdir)
            results["stdio"][name] = stdio_mb(stdio, workdir)
            print(
                f"{name}: gunicorn {results['gunicorn'][name]:.0f} MB, stdio {results['stdio'][name]:.0f} MB"
            )
    return results


def verdicts(results: dict[str, dict[str, float]]) -> list[tuple[str, float, float]]:
    gunicorn, stdio = results["gunicorn"], results["stdio"]
    return [
        (
            "gunicorn -w 4: added by mcp-tokens",
            gunicorn["mcp-tokens"] - gunicorn["OpenTelemetry"],
            BOUNDS_MB["gunicorn"],
        ),
        (
            "gunicorn -w 4: the guard on top",
            gunicorn["mcp-tokens + guard"] - gunicorn["mcp-tokens"],
            BOUNDS_MB["guard"],
        ),
        (
            "four stdio servers: added by mcp-tokens",
            stdio["mcp-tokens"] - stdio["OpenTelemetry"],
            BOUNDS_MB["stdio"],
        ),
    ]


def render(results: dict[str, dict[str, float]]) -> str:
    rows = [
        [deployment, *(f"{results[key][name]:.0f}" for name in VARIANTS)]
        for deployment, key in (
            ("gunicorn -w 4, streamable HTTP", "gunicorn"),
            ("four stdio servers", "stdio"),
        )
    ]
    checks = [
        [what, f"{added:+.0f}", f"{bound:.0f}", "ok" if added <= bound else "over"]
        for what, added, bound in verdicts(results)
    ]
    return (
        "PSS summed over every process, MB:\n\n"
        + table(["deployment", *VARIANTS], rows)
        + "\n\n"
        + table(["what mcp-tokens adds", "MB", "bound", ""], checks, [False, True, True, False])
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_markdown_option(parser)
    args = parser.parse_args()
    results = measure()
    body = render(results)
    publish(body, args.markdown, "footprint", "tests.bench.footprint")
    missed = [what for what, added, bound in verdicts(results) if added > bound]
    if missed:
        print("over its bound: " + "; ".join(missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
