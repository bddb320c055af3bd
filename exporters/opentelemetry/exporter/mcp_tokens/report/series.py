# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The metric series a report is built from, independent of where they came from.

Two sources fill a `Snapshot`: the exporter (OpenTelemetry `MetricsData`, cumulative, see
`state.py`) and `mcp-tokens top` (a Prometheus `/metrics` page, see `prometheus.py`). Both
use OpenTelemetry metric and attribute names (`mcp_tokens.payload`, `gen_ai.tool.name`), so
one model (`model.py`) reads either.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from opentelemetry.instrumentation.mcp_tokens import semconv

# Attributes as a hashable, ordered key: ((name, value), ...), values as text.
Attributes = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Attributes]

# Every metric of the contract the report reads (docs/telemetry.md).
REPORTED_METRICS: frozenset[str] = frozenset(
    {
        semconv.CLIENT_OPERATION_DURATION,
        semconv.SERVER_OPERATION_DURATION,
        semconv.PAYLOAD,
        semconv.OVERHEAD,
        semconv.RESPONSES,
        semconv.TOOL_DEFINITION,
        semconv.BUDGET_UTILIZATION_METRIC,
        semconv.BUDGET_CROSSINGS,
        semconv.PADDING_DETECTIONS,
        semconv.ANALYSIS_DURATION,
        semconv.ANALYSIS_SKIPPED,
        semconv.HOST_OVER_LIMIT,
        semconv.TOOLS,
    }
)
# Peers choose tool and server names: a process could otherwise make the report grow without
# bound. The instrumentation folds labels long before this (200 tools x 50 servers).
MAX_SERIES = 50_000


def attributes_key(attributes: Mapping[str, object] | None) -> Attributes:
    if not attributes:
        return ()
    return tuple(sorted((str(name), _text(value)) for name, value in attributes.items()))


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_text(item) for item in value)
    return str(value)


@dataclass(frozen=True)
class Histogram:
    """Explicit-bucket histogram data: `counts[i]` observations in (bounds[i-1], bounds[i]], the
    last one above every bound. `minimum`/`maximum` are exact when the source has them (OTLP
    does, Prometheus text does not)."""

    count: int
    total: float
    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    minimum: float | None = None
    maximum: float | None = None

    def merged(self, other: Histogram) -> Histogram:
        """This plus a later delta of the same stream (bucket layouts must match, else the later wins)."""
        if other.bounds != self.bounds or len(other.counts) != len(self.counts):
            return other
        return Histogram(
            self.count + other.count,
            self.total + other.total,
            self.bounds,
            tuple(a + b for a, b in zip(self.counts, other.counts, strict=True)),
            _lowest(self.minimum, other.minimum),
            _highest(self.maximum, other.maximum),
        )

    def quantile(self, q: float) -> float | None:
        """An estimate of quantile `q` from the buckets (Prometheus' linear interpolation), kept
        within the exact min and max when they are known. None when there is no observation."""
        if self.count <= 0 or not self.counts:
            return None
        rank = q * self.count
        seen = 0
        for index, in_bucket in enumerate(self.counts):
            if in_bucket <= 0 or seen + in_bucket < rank:
                seen += in_bucket
                continue
            lower = self.bounds[index - 1] if index > 0 else min(0.0, self.bounds[0] if self.bounds else 0.0)
            if index < len(self.bounds):
                upper = self.bounds[index]
            else:  # the overflow bucket has no upper bound: the max is the best we know
                upper = self.maximum if self.maximum is not None else lower
            estimate = lower + (upper - lower) * max(0.0, rank - seen) / in_bucket
            return self._clamped(estimate)
        return self._clamped(self.bounds[-1] if self.bounds else 0.0)

    def _clamped(self, value: float) -> float:
        if self.minimum is not None and math.isfinite(self.minimum):
            value = max(value, self.minimum)
        if self.maximum is not None and math.isfinite(self.maximum):
            value = min(value, self.maximum)
        return value

    def upper_bound(self) -> float | None:
        """The exact max if known; else the smallest bucket bound that holds every observation
        (infinity when some fell in the overflow bucket)."""
        if self.count <= 0:
            return None
        if self.maximum is not None:
            return self.maximum
        for index in range(len(self.counts) - 1, -1, -1):
            if self.counts[index] > 0:
                return self.bounds[index] if index < len(self.bounds) else math.inf
        return None


def _lowest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else min(a, b)


def _highest(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


Value = float | Histogram


@dataclass
class Snapshot:
    """The latest value of every series (counters and gauges as numbers, histograms as
    `Histogram`), the resource's service name, and how many series were dropped at the cap."""

    series: dict[SeriesKey, Value] = field(default_factory=dict)
    service: str = ""
    dropped_series: int = 0

    def items(self, name: str) -> Iterable[tuple[dict[str, str], Value]]:
        for (metric, attributes), value in self.series.items():
            if metric == name:
                yield dict(attributes), value
