# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp_tokens_remote_write`: push the metrics to a Prometheus remote-write receiver.

    OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_ENDPOINT=http://mimir:9009/api/v1/push \\
    opentelemetry-instrument --metrics_exporter mcp_tokens_remote_write uvicorn app:app --workers 4

Remote write 1.0 (a snappy-compressed protobuf `WriteRequest`), which Prometheus
(`--web.enable-remote-write-receiver`), Mimir, Cortex, Thanos Receive and VictoriaMetrics all
accept. The series are the stock `prometheus` exporter's, name for name and label for label
(they are built by its own reader, on a private registry), plus the two labels a scrape would
add: `job` (`service.namespace/service.name`, or `service.name`, as Prometheus derives it from
OTLP) and `instance` (`service.instance.id`, which the SDK makes unique per process; else
`host:pid`). Every process pushes its own series, so the workers of one server never collide;
queries add them up (`sum by (...)`), and the tool-definition gauge is read with `max` per tool,
as the shipped dashboards do. `target_info` carries the other resource attributes.

Every `..._INTERVAL` (default 15 s) a thread collects the cumulative values and posts them;
failures (connection errors, 5xx, 429) are retried with back-off until `..._TIMEOUT` (10 s) has
passed, then that snapshot is dropped: the next one carries the same cumulative totals, so
nothing queues up and memory stays bounded by the series count. Nothing runs on the
application's threads; a final push is made at shutdown, bounded by the timeout.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry.exporter.mcp_tokens.prometheus.samples import Family, SampleKey, flatten
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import MetricsData
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry

from . import snappy
from .protobuf import Metadata, Series, write_request
from .settings import ENDPOINT, RemoteWriteSettings

_logger = logging.getLogger(__name__)

_HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": "mcp-tokens-remote-write",
}
_FIRST_BACKOFF_S = 0.25
_MAX_BACKOFF_S = 5.0
# The resource attributes that become `job` and `instance` are not repeated on target_info.
_PROMOTED = ("service.name", "service.namespace", "service.instance.id")
_LABEL_CHARACTERS = re.compile(r"[^a-zA-Z0-9]+")


class McpTokensRemoteWriteReader(PrometheusMetricReader):
    """The `mcp_tokens_remote_write` metrics exporter (a reader with its own push thread)."""

    def __init__(self, settings: RemoteWriteSettings | None = None) -> None:
        self._own = CollectorRegistry()
        super().__init__(registry=self._own, disable_target_info=True)
        self._settings = settings or RemoteWriteSettings.from_env()
        self._resource: Resource | None = None
        self._sender = Sender(self._settings)
        self._push_lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        if not self._settings.endpoint:
            _logger.warning("mcp-tokens: set %s to push metrics; nothing is pushed", ENDPOINT)
            return
        self._start_thread()
        if hasattr(os, "register_at_fork"):
            reference = weakref.ref(self)

            def after_fork_in_child() -> None:
                reader = reference()
                if reader is not None:
                    reader._after_fork_in_child()

            os.register_at_fork(after_in_child=after_fork_in_child)

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mcp-tokens-remote-write", daemon=True)
        self._thread.start()

    def _after_fork_in_child(self) -> None:
        # The SDK gives a forked child its own service.instance.id; its pushes follow.
        self._push_lock = threading.Lock()
        if not self._stopped.is_set():
            self._start_thread()

    def _run(self) -> None:
        while not self._stopped.wait(self._settings.interval_s):
            self.push()

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        if metrics_data is not None and metrics_data.resource_metrics:
            self._resource = metrics_data.resource_metrics[0].resource
        super()._receive_metrics(metrics_data, timeout_millis, **kwargs)

    def push(self) -> bool:
        """Collect and post once; False when the receiver did not take it."""
        deadline = time.monotonic() + self._settings.timeout_s
        with self._push_lock:
            try:
                _, values = flatten(self._own.collect())
                if not values:
                    return True
                body = snappy.compress(encode(values, self._resource, int(time.time() * 1000)))
            except Exception:
                _logger.warning("mcp-tokens: could not build a remote-write request", exc_info=True)
                return False
            return self._sender.send(body, deadline)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        if not self._settings.endpoint:
            return True
        return self.push()

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        if self._settings.endpoint and not self._stopped.is_set():
            self._stopped.set()
            thread = self._thread
            if thread is not None and thread is not threading.current_thread():
                thread.join(self._settings.timeout_s)
            # A push still under way carries nearly the final totals; exit waits for one push only.
            if thread is None or not thread.is_alive():
                self.push()
        super().shutdown(timeout_millis, **kwargs)


def job_and_instance(resource: Resource | None) -> tuple[str, str]:
    attributes: Mapping[str, Any] = resource.attributes if resource is not None else {}
    name = str(attributes.get("service.name") or "unknown_service")
    namespace = attributes.get("service.namespace")
    job = f"{namespace}/{name}" if namespace else name
    instance = attributes.get("service.instance.id")
    return job, str(instance) if instance else f"{socket.gethostname()}:{os.getpid()}"


def _label_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _target_info(resource: Resource | None, identity: dict[str, str]) -> dict[str, str]:
    labels = {
        _LABEL_CHARACTERS.sub("_", key): _label_value(value)
        for key, value in (resource.attributes.items() if resource is not None else ())
        if key not in _PROMOTED
    }
    return {**labels, **identity, "__name__": "target_info"}


def encode(values: Mapping[SampleKey, float], resource: Resource | None, timestamp_ms: int) -> bytes:
    """The `WriteRequest` for one snapshot of cumulative values."""
    job, instance = job_and_instance(resource)
    identity = {"job": job, "instance": instance}
    series = [Series(sorted(_target_info(resource, identity).items()), 1.0, timestamp_ms)]
    for key, value in values.items():
        labels = {**dict(key.labels), **identity, "__name__": key.sample}
        series.append(Series(sorted(labels.items()), value, timestamp_ms))
    return write_request(series, _metadata(values))


def _metadata(values: Iterable[SampleKey]) -> list[Metadata]:
    families: dict[Family, None] = dict.fromkeys(key.family for key in values)
    return [
        Metadata(_type_line_name(family), family.type, family.documentation, family.unit)
        for family in families
    ]


def _type_line_name(family: Family) -> str:
    """The name a scrape's `# TYPE` line gives the family (a counter's ends in `_total`)."""
    return family.name + "_total" if family.type == "counter" else family.name


class Sender:
    """Posts request bodies, retrying what remote write says may be retried."""

    def __init__(self, settings: RemoteWriteSettings) -> None:
        self._settings = settings
        self._failing = False

    def send(self, body: bytes, deadline: float) -> bool:
        backoff = _FIRST_BACKOFF_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return self._failed("no answer within the timeout", final=True)
            retry_after = self._post(body, remaining)
            if retry_after is None:
                if self._failing:
                    _logger.warning("mcp-tokens: remote write to %s works again", self._settings.endpoint)
                    self._failing = False
                return True
            if retry_after < 0:
                return False
            time.sleep(max(0.0, min(max(backoff, retry_after), deadline - time.monotonic())))
            backoff = min(backoff * 2, _MAX_BACKOFF_S)

    def _post(self, body: bytes, timeout_s: float) -> float | None:
        """None when taken; seconds to wait before a retry; -1 when retrying cannot help."""
        request = urllib.request.Request(
            self._settings.endpoint, data=body, headers={**_HEADERS, **self._settings.headers}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                response.read(4096)
            return None
        except urllib.error.HTTPError as error:
            detail = error.read(512).decode("utf-8", "replace").strip()
            error.close()
            if error.code == 429 or error.code >= 500:
                self._failed(f"HTTP {error.code} {detail}")
                return _retry_after(error.headers.get("Retry-After"))
            self._failed(f"HTTP {error.code} {detail} (not retried)", final=True)
            return -1.0
        except (OSError, ValueError) as error:
            self._failed(str(getattr(error, "reason", error)))
            return 0.0

    def _failed(self, reason: str, final: bool = False) -> bool:
        if not self._failing:
            _logger.warning(
                "mcp-tokens: remote write to %s failed: %s%s",
                self._settings.endpoint,
                reason,
                "" if final else " (retrying; the next snapshot carries the same totals)",
            )
            self._failing = True
        else:
            _logger.debug("mcp-tokens: remote write failed again: %s", reason)
        return False


def _retry_after(header: str | None) -> float:
    try:
        return max(0.0, float(header)) if header else 0.0
    except ValueError:
        return 0.0
