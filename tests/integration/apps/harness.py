# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Start test servers as subprocesses, with bounded waits: free ports, readiness, clean shutdown."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from examples.processes import free_port, port_accepts

from ._serve import HOST

REPO_ROOT = Path(__file__).resolve().parents[3]
FLAVOURS = ("lowlevel", "sdk_fastmcp", "fastmcp")
HTTP_TRANSPORTS = ("sse", "streamable-http", "stateless-http")
STARTUP_TIMEOUT_S = 20.0
SHUTDOWN_TIMEOUT_S = 5.0


def server_module(flavour: str) -> str:
    if flavour not in FLAVOURS:
        raise ValueError(f"unknown server flavour {flavour!r}; expected one of {FLAVOURS}")
    return f"tests.integration.apps.{flavour}_server"


def server_command(flavour: str, transport: str, port: int = 0, python: str | None = None) -> list[str]:
    """argv that runs a test server; from REPO_ROOT as working directory."""
    argv = [python or sys.executable, "-m", server_module(flavour), "--transport", transport]
    return argv if transport == "stdio" else [*argv, "--port", str(port)]


def subprocess_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment plus `extra`, with the repo root importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


def wait_for_port(port: int, timeout_s: float, process: subprocess.Popen[bytes] | None = None) -> None:
    """Return once 127.0.0.1:port accepts connections; raise if the process died or time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(
                f"server exited with code {process.returncode} before listening on port {port}"
            )
        if port_accepts(port):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listened on {HOST}:{port} within {timeout_s} s")


@dataclass(frozen=True)
class RunningServer:
    flavour: str
    transport: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def stop_process(process: subprocess.Popen[bytes], timeout_s: float = SHUTDOWN_TIMEOUT_S) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=timeout_s)


def start_server(
    flavour: str,
    transport: str,
    log_dir: Path,
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    command_prefix: Sequence[str] = (),
) -> RunningServer:
    """Launch an HTTP test server on a free port without waiting for it (see `wait_ready`).

    `command_prefix` goes before the Python command, e.g. `["opentelemetry-instrument", ...]`.
    Output goes to a log file in `log_dir` (never a pipe, which could fill up and block the server).
    """
    if transport not in HTTP_TRANSPORTS:
        raise ValueError(f"start_server is for HTTP transports {HTTP_TRANSPORTS}, got {transport!r}")
    port = free_port()
    argv = [*command_prefix, *server_command(flavour, transport, port, python)]
    log_path = log_dir / f"{flavour}-{transport}-{port}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=subprocess_env(env), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    return RunningServer(flavour, transport, port, process, log_path)


def wait_ready(server: RunningServer, timeout_s: float = STARTUP_TIMEOUT_S) -> None:
    try:
        wait_for_port(server.port, timeout_s, server.process)
    except (RuntimeError, TimeoutError) as exc:
        raise RuntimeError(f"{server.flavour}/{server.transport}: {exc}; log:\n{server.log_text()}") from exc


@contextlib.contextmanager
def running_servers(
    specs: Sequence[tuple[str, str]],
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    command_prefix: Sequence[str] = (),
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
) -> Iterator[dict[tuple[str, str], RunningServer]]:
    """Run one server per (flavour, transport) in `specs`, started together, until the block exits."""
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-servers-") as tmp:
        servers: dict[tuple[str, str], RunningServer] = {}
        try:
            for flavour, transport in specs:
                servers[(flavour, transport)] = start_server(
                    flavour, transport, Path(tmp), env=env, python=python, command_prefix=command_prefix
                )
            deadline = time.monotonic() + startup_timeout_s
            for server in servers.values():
                wait_ready(server, max(0.1, deadline - time.monotonic()))
            yield servers
        finally:
            for server in servers.values():
                stop_process(server.process)


@contextlib.contextmanager
def running_server(
    flavour: str,
    transport: str,
    *,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
    command_prefix: Sequence[str] = (),
    startup_timeout_s: float = STARTUP_TIMEOUT_S,
) -> Iterator[RunningServer]:
    """Run one HTTP test server in a subprocess until the block exits."""
    with running_servers(
        [(flavour, transport)],
        env=env,
        python=python,
        command_prefix=command_prefix,
        startup_timeout_s=startup_timeout_s,
    ) as servers:
        yield servers[(flavour, transport)]
