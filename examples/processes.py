# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Run Python modules under the real `opentelemetry-instrument` launcher, with bounded waits.

Shared by the demo orchestrator and the end-to-end tests: free ports on 127.0.0.1, the
environment that selects an exporter, readiness by port, and a stop that never leaves an
orphan (SIGTERM, then SIGKILL after a bounded wait; `opentelemetry-instrument` execs the
interpreter, so the process we started is the one we stop).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
REPO_ROOT = Path(__file__).resolve().parents[1]
STOP_TIMEOUT_S = 5.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_accepts(port: int, timeout_s: float = 0.2) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def launcher(python: str | None = None) -> str:
    """The `opentelemetry-instrument` script of the interpreter's environment."""
    interpreter = Path(python or sys.executable)
    beside = interpreter.parent / "opentelemetry-instrument"
    if beside.exists():
        return str(beside)
    found = shutil.which("opentelemetry-instrument")
    if found is None:
        raise FileNotFoundError(
            f"opentelemetry-instrument not found beside {interpreter} nor on PATH; "
            "install opentelemetry-instrumentation in that environment"
        )
    return found


def prometheus_env(service: str, metrics_port: int) -> dict[str, str]:
    """Metrics on http://127.0.0.1:<metrics_port>/metrics, no traces or logs exported."""
    return {
        "OTEL_SERVICE_NAME": service,
        "OTEL_METRICS_EXPORTER": "prometheus",
        "OTEL_EXPORTER_PROMETHEUS_HOST": HOST,
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }


def report_env(paths: Sequence[Path], *, terminal: bool = True, **settings: str) -> dict[str, str]:
    """The mcp-tokens report exporter's settings: report files (format by extension) and any
    other `OTEL_EXPORTER_MCP_TOKENS_REPORT_<NAME>` given as `name=value`. Combine with the
    exporter list, e.g. `OTEL_METRICS_EXPORTER=prometheus,mcp_tokens_report`."""
    env = {
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_PATH": ",".join(str(path) for path in paths),
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_TERMINAL": "true" if terminal else "false",
    }
    env.update({f"OTEL_EXPORTER_MCP_TOKENS_REPORT_{name.upper()}": value for name, value in settings.items()})
    return env


def otlp_env(service: str, endpoint: str, export_interval_ms: int = 500) -> dict[str, str]:
    """OTLP/HTTP protobuf to `endpoint` (e.g. http://127.0.0.1:4318), exported every
    `export_interval_ms`. Choose the exporters with the launcher's own flags
    (`--metrics_exporter otlp --traces_exporter otlp`), as a user would."""
    return {
        "OTEL_SERVICE_NAME": service,
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_METRIC_EXPORT_INTERVAL": str(export_interval_ms),
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


# Where the counting service lives is the machine's, not a caller's setting: children share
# it; and how long their spans wait for exact counts is the test suite's.
_KEPT_OTEL = frozenset(
    {"OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR", "OTEL_INSTRUMENTATION_MCP_TOKENS_SPAN_WAIT"}
)


def child_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This environment, minus any OTEL_* of the caller's own, plus `extra`; the repo importable."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith("OTEL_") or key in _KEPT_OTEL
    }
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


@dataclass
class Child:
    """A started process, its log file and the ports it should listen on."""

    name: str
    process: subprocess.Popen[bytes]
    log_path: Path
    ports: tuple[int, ...] = ()
    argv: list[str] = field(default_factory=list)

    def log_text(self, limit: int = 6000) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return text[-limit:]

    def wait_ready(self, timeout_s: float) -> None:
        """Return once every port accepts connections; raise if the process died or time ran out."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.ports)
        while pending and time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with code {self.process.returncode} before listening on "
                    f"{pending}; log:\n{self.log_text()}"
                )
            pending = [port for port in pending if not port_accepts(port)]
            if pending:
                time.sleep(0.05)
        if pending:
            raise TimeoutError(f"{self.name}: nothing listened on {HOST}:{pending} within {timeout_s} s")

    def stop(
        self, timeout_s: float = STOP_TIMEOUT_S, grace_s: float = 0.0, interrupt: bool = False
    ) -> int | None:
        """Close stdin (a lingering client exits on that) and give it `grace_s`; with `interrupt`,
        SIGINT and a bounded wait (uvicorn re-raises SIGTERM after its shutdown, which skips exit
        hooks such as the report exporter's; SIGINT ends it through them); then SIGTERM, a
        bounded wait, and SIGKILL as a last resort. Returns the exit code."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        if grace_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=grace_s)
        if interrupt and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=timeout_s)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout_s)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode


def start_module(
    name: str,
    module: str,
    args: Sequence[str],
    env: Mapping[str, str],
    log_dir: Path,
    *,
    instrument: bool = True,
    launcher_args: Sequence[str] = (),
    ports: Sequence[int] = (),
    python: str | None = None,
    stdout_pipe: bool = False,
) -> Child:
    """Start `python -m module args` (under `opentelemetry-instrument` unless told otherwise).

    Output goes to a log file (never an unread pipe, which could fill and block the child),
    except stdout with `stdout_pipe`, for a child that reports on it line by line.
    """
    interpreter = python or sys.executable
    argv = [interpreter, "-m", module, *args]
    if instrument:
        argv = [launcher(interpreter), *launcher_args, *argv]
    log_path = log_dir / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=child_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if stdout_pipe else log,
            stderr=log,
        )
    return Child(name, process, log_path, tuple(ports), argv)


def read_marked_line(child: Child, marker: str, timeout_s: float) -> str:
    """The rest of the first stdout line of `child` that starts with `marker`, within `timeout_s`.

    Reads the pipe's raw bytes (a buffered text reader could hold the line while select waits).
    """
    stream = child.process.stdout
    if stream is None:
        raise ValueError(f"{child.name} was not started with stdout_pipe=True")
    deadline = time.monotonic() + timeout_s
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=min(0.2, max(0.0, deadline - time.monotonic()))):
                if child.process.poll() is not None:
                    break
                continue
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                text = line.decode("utf-8", "replace")
                if text.startswith(marker):
                    return text[len(marker) :].strip()
    raise TimeoutError(
        f"{child.name}: no line starting with {marker!r} within {timeout_s} s "
        f"(exit code {child.process.poll()}); log:\n{child.log_text()}"
    )
