# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The exporter's memory: the latest cumulative value of every mcp-tokens series.

The exporter asks for CUMULATIVE temporality, so each export carries the whole run so far and
the latest one replaces what was kept. Should a reader still hand over DELTA points (a view
or a reader configured by hand), they are added up instead, so the report stays the run's
total either way. Only the metrics of the contract are kept, at most `MAX_SERIES` series.
"""

from __future__ import annotations

import math
import threading
from typing import Any

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    MetricsData,
    Sum,
)
from opentelemetry.sdk.metrics.export import Histogram as OtelHistogram

from .series import MAX_SERIES, REPORTED_METRICS, Histogram, SeriesKey, Snapshot, Value, attributes_key


class MetricState:
    """Thread-safe: the reader's export thread updates it, shutdown reads it."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self._lock = threading.Lock()
        self._series: dict[SeriesKey, Value] = {}
        self._service = ""
        self._dropped: set[SeriesKey] = set()
        self._max_series = max_series

    def update(self, data: MetricsData) -> None:
        with self._lock:
            for resource_metrics in data.resource_metrics:
                service = resource_metrics.resource.attributes.get("service.name")
                if service and not self._service:
                    self._service = str(service)
                for scope_metrics in resource_metrics.scope_metrics:
                    for metric in scope_metrics.metrics:
                        if metric.name in REPORTED_METRICS:
                            self._update_metric(metric.name, metric.data)

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(dict(self._series), self._service, len(self._dropped))

    def _update_metric(self, name: str, data: Any) -> None:
        if isinstance(data, OtelHistogram):
            delta = data.aggregation_temporality == AggregationTemporality.DELTA
            for histogram_point in data.data_points:
                key = (name, attributes_key(histogram_point.attributes))
                self._store(key, _histogram(histogram_point), delta)
        elif isinstance(data, (Sum, Gauge)):
            delta = isinstance(data, Sum) and data.aggregation_temporality == AggregationTemporality.DELTA
            for point in data.data_points:
                self._store((name, attributes_key(point.attributes)), float(point.value), delta)

    def _store(self, key: SeriesKey, value: Value, delta: bool) -> None:
        previous = self._series.get(key)
        if previous is None and len(self._series) >= self._max_series:
            if len(self._dropped) < MAX_SERIES:  # the count of drops is bounded too
                self._dropped.add(key)
            return
        if delta and previous is not None:
            value = _added(previous, value)
        self._series[key] = value


def _added(previous: Value, value: Value) -> Value:
    if isinstance(previous, Histogram) and isinstance(value, Histogram):
        return previous.merged(value)
    if isinstance(previous, float) and isinstance(value, float):
        return previous + value
    return value


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _histogram(point: Any) -> Histogram:
    count = int(point.count)
    # The SDK reports min/max as +inf/-inf when nothing was recorded.
    minimum = _finite(point.min) if count else None
    maximum = _finite(point.max) if count else None
    return Histogram(
        count=count,
        total=float(point.sum),
        bounds=tuple(float(bound) for bound in point.explicit_bounds),
        counts=tuple(int(n) for n in point.bucket_counts),
        minimum=minimum,
        maximum=maximum,
    )
