# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""An in-process OTLP/HTTP receiver: `POST /v1/metrics` and `/v1/traces` with protobuf bodies,
decoded with opentelemetry-proto (Prometheus 2.42 has no OTLP receiver, and no Collector is
packaged for this machine).

Metrics are kept as the latest cumulative data point per (service, metric, attributes), the
way a backend would store them; spans are kept as flat records.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from examples.processes import HOST

MAX_BODY_BYTES = 64 * 1024 * 1024

Attributes = tuple[tuple[str, Any], ...]


def any_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(any_value(v) for v in value.array_value.values)
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind) if kind else None


def attributes(pairs: Any) -> Attributes:
    return tuple(sorted((pair.key, any_value(pair.value)) for pair in pairs))


@dataclass(frozen=True)
class HistogramPoint:
    count: int
    sum: float
    bounds: tuple[float, ...]
    bucket_counts: tuple[int, ...]


@dataclass(frozen=True)
class SpanRecord:
    service: str
    scope: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: Mapping[str, Any]
    events: tuple[tuple[str, Mapping[str, Any]], ...]


@dataclass(frozen=True)
class MetricDescriptor:
    """What a backend's OTLP translation names a metric by: its name, unit and data type."""

    name: str
    unit: str
    kind: str  # "sum", "gauge", "histogram", ...
    monotonic: bool
    cumulative: bool


@dataclass
class OtlpReceiver:
    port: int = 0
    points: dict[tuple[str, str, Attributes], Any] = field(default_factory=dict)
    descriptors: dict[tuple[str, str], MetricDescriptor] = field(default_factory=dict)
    spans: list[SpanRecord] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def add_metrics(self, request: ExportMetricsServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for resource_metrics in request.resource_metrics:
                service = _service(resource_metrics.resource.attributes)
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        self._add_metric(service, metric)

    def _add_metric(self, service: str, metric: Any) -> None:
        kind = metric.WhichOneof("data")
        data = getattr(metric, kind) if kind else None
        temporality = getattr(data, "aggregation_temporality", 2)  # gauges have none
        self.descriptors[(service, metric.name)] = MetricDescriptor(
            metric.name, metric.unit, kind or "", bool(getattr(data, "is_monotonic", False)), temporality == 2
        )
        if kind == "histogram":
            for point in metric.histogram.data_points:
                self.points[(service, metric.name, attributes(point.attributes))] = HistogramPoint(
                    int(point.count),
                    float(point.sum),
                    tuple(point.explicit_bounds),
                    tuple(point.bucket_counts),
                )
        elif kind in ("sum", "gauge"):
            for point in getattr(metric, kind).data_points:
                value = point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
                self.points[(service, metric.name, attributes(point.attributes))] = value

    def add_spans(self, request: ExportTraceServiceRequest) -> None:
        with self.lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                service = _service(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        self.spans.append(
                            SpanRecord(
                                service=service,
                                scope=scope_spans.scope.name,
                                name=span.name,
                                kind=int(span.kind),
                                trace_id=span.trace_id.hex(),
                                span_id=span.span_id.hex(),
                                parent_span_id=span.parent_span_id.hex(),
                                attributes=dict(attributes(span.attributes)),
                                events=tuple((e.name, dict(attributes(e.attributes))) for e in span.events),
                            )
                        )

    def histogram_sums(self, service: str, metric: str, **match: Any) -> dict[Attributes, HistogramPoint]:
        with self.lock:
            return {
                attrs: point
                for (svc, name, attrs), point in self.points.items()
                if svc == service
                and name == metric
                and all(dict(attrs).get(k) == v for k, v in match.items())
            }

    def spans_of(self, service: str) -> list[SpanRecord]:
        with self.lock:
            return [span for span in self.spans if span.service == service]

    def wait_until(self, predicate: Any, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.2)
        return bool(predicate())


def _service(resource_attributes: Any) -> str:
    return str(dict(attributes(resource_attributes)).get("service.name", ""))


_ROUTES: dict[str, tuple[Any, Any, str]] = {
    "/v1/metrics": (ExportMetricsServiceRequest, ExportMetricsServiceResponse, "add_metrics"),
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse, "add_spans"),
}


@contextmanager
def running_otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            route = _ROUTES.get(self.path)
            length = int(self.headers.get("Content-Length", "0"))
            if route is None or length > MAX_BODY_BYTES:
                self.send_error(404 if route is None else 413)
                return
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding", "") == "gzip":
                body = gzip.decompress(body)
            request_type, response_type, add = route
            message = request_type()
            message.ParseFromString(body)
            getattr(receiver, add)(message)
            payload = response_type().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Handler)
    receiver.port = int(server.server_address[1])
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
