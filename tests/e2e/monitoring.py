# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A real Prometheus and Alertmanager for the end-to-end tests, and an in-process webhook.

Each runs on 127.0.0.1 with its own temporary config and storage (never the Debian
packages' system services), and every wait is bounded.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from examples.processes import HOST, free_port

READY_TIMEOUT_S = 20.0


def find_binary(*names: str) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    return None


def http_json(url: str, data: bytes | None = None, timeout_s: float = 5.0) -> Any:
    request = urllib.request.Request(url, data=data)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read().decode("utf-8"))


def wait_http_ok(url: str, process: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url}: process exited with {process.returncode}; log:\n{_tail(log)}")
        try:
            with urllib.request.urlopen(url, timeout=1.0) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} not ready within {timeout_s} s; log:\n{_tail(log)}")


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return ""


def stop(process: subprocess.Popen[bytes], timeout_s: float = 5.0) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout_s)


# --- webhook -------------------------------------------------------------------------------
@dataclass
class Webhook:
    """Collects every Alertmanager webhook notification it receives."""

    port: int
    notifications: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/alerts"

    def alerts(self) -> list[dict[str, Any]]:
        with self.lock:
            return [alert for note in self.notifications for alert in note.get("alerts", [])]

    def wait_for(self, predicate: Any, timeout_s: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for alert in self.alerts():
                if predicate(alert):
                    return alert
            time.sleep(0.2)
        return None


@contextmanager
def running_webhook() -> Iterator[Webhook]:
    hook = Webhook(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(min(length, 10_000_000))
            try:
                note = json.loads(body)
            except ValueError:
                note = {"invalid": body[:200].decode("utf-8", "replace")}
            with hook.lock:
                hook.notifications.append(note)
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Handler)
    hook.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, name="webhook", daemon=True)
    thread.start()
    try:
        yield hook
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


# --- Alertmanager --------------------------------------------------------------------------
@dataclass
class Alertmanager:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


def alertmanager_config(webhook_url: str) -> dict[str, Any]:
    return {
        "route": {
            "receiver": "webhook",
            "group_by": ["alertname", "job", "gen_ai_tool_name"],
            "group_wait": "0s",
            "group_interval": "1s",
            "repeat_interval": "1h",
        },
        "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook_url, "send_resolved": False}]}],
    }


@contextmanager
def running_alertmanager(binary: str, workdir: Path, webhook_url: str) -> Iterator[Alertmanager]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "alertmanager.yml"
    config.write_text(yaml.safe_dump(alertmanager_config(webhook_url)), encoding="utf-8")
    port = free_port()
    log = workdir / "alertmanager.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.path={workdir / 'data'}",
                f"--web.listen-address={HOST}:{port}",
                "--cluster.listen-address=",  # no gossip port: a single local instance
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:
        wait_http_ok(f"http://{HOST}:{port}/-/ready", process, log, READY_TIMEOUT_S)
        yield Alertmanager(port, process)
    finally:
        stop(process)


# --- Prometheus ----------------------------------------------------------------------------
@dataclass
class Prometheus:
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def query(self, expr: str, timeout_s: float = 10.0) -> dict[str, Any]:
        """The `/api/v1/query` answer (errors come back as JSON with status "error")."""
        data = urllib.parse.urlencode({"query": expr}).encode()
        try:
            answer: dict[str, Any] = http_json(f"{self.url}/api/v1/query", data, timeout_s)
        except urllib.error.HTTPError as error:
            answer = json.loads(error.read().decode("utf-8"))
        return answer

    def vector(self, expr: str) -> list[dict[str, Any]]:
        answer = self.query(expr)
        if answer.get("status") != "success":
            raise AssertionError(f"query failed: {expr!r}: {answer}")
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result

    def values_by(self, expr: str, label: str) -> dict[str, float]:
        return {item["metric"].get(label, ""): float(item["value"][1]) for item in self.vector(expr)}

    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = http_json(f"{self.url}/api/v1/alerts")["data"]["alerts"]
        return alerts

    def metric_names(self) -> set[str]:
        return set(http_json(f"{self.url}/api/v1/label/__name__/values")["data"])

    def wait_until(self, expr: str, predicate: Any, timeout_s: float) -> list[dict[str, Any]]:
        """Poll `expr` until `predicate(result)` holds; returns the last result either way."""
        deadline = time.monotonic() + timeout_s
        result: list[dict[str, Any]] = []
        while True:
            result = self.vector(expr)
            if predicate(result) or time.monotonic() >= deadline:
                return result
            time.sleep(0.5)


def prometheus_config(
    scrape_jobs: Mapping[str, Sequence[int]], rule_files: Sequence[Path], alertmanager_port: int | None
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            {"job_name": job, "static_configs": [{"targets": [f"{HOST}:{port}" for port in ports]}]}
            for job, ports in scrape_jobs.items()
        ],
    }
    if alertmanager_port is not None:
        # Configured before start: an alert that fires before an Alertmanager is known is dropped.
        config["alerting"] = {
            "alertmanagers": [{"static_configs": [{"targets": [f"{HOST}:{alertmanager_port}"]}]}]
        }
    return config


@contextmanager
def running_prometheus(
    binary: str,
    workdir: Path,
    scrape_jobs: Mapping[str, Sequence[int]],
    rule_files: Sequence[Path] = (),
    alertmanager_port: int | None = None,
    *,
    extra_args: Sequence[str] = (),
) -> Iterator[Prometheus]:
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(prometheus_config(scrape_jobs, rule_files, alertmanager_port)), encoding="utf-8"
    )
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address={HOST}:{port}",
                "--rules.alert.resend-delay=1s",
                *extra_args,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    try:
        wait_http_ok(f"http://{HOST}:{port}/-/ready", process, log, READY_TIMEOUT_S)
        yield Prometheus(port, process, log)
    finally:
        stop(process)
