# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A `Snapshot` from a Prometheus `/metrics` page (the text format, as
`opentelemetry-exporter-prometheus` writes it), for `mcp-tokens top`.

Prometheus names are mapped back to the contract's OpenTelemetry names (docs/telemetry.md):
`mcp_tokens_payload_bucket{le=...}` becomes the buckets of `mcp_tokens.payload`, label
`gen_ai_tool_name` becomes `gen_ai.tool.name`. Labels the report does not use (`job`,
`instance`, `otel_scope_*`) are dropped, and series that then coincide (one page federating
several instances) are added up. Parsing is prometheus_client's; the caller bounds the text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from opentelemetry.instrumentation.mcp_tokens import semconv
from prometheus_client.parser import text_string_to_metric_families

from .series import MAX_SERIES, Attributes, Histogram, SeriesKey, Snapshot, Value

# Prometheus base name -> (OpenTelemetry name, kind)
_HISTOGRAMS = {
    "mcp_client_operation_duration_seconds": semconv.CLIENT_OPERATION_DURATION,
    "mcp_server_operation_duration_seconds": semconv.SERVER_OPERATION_DURATION,
    "mcp_tokens_payload": semconv.PAYLOAD,
    "mcp_tokens_budget_utilization": semconv.BUDGET_UTILIZATION_METRIC,
    # The OTLP path to Prometheus adds `_ratio` to unit-1 metrics.
    "mcp_tokens_budget_utilization_ratio": semconv.BUDGET_UTILIZATION_METRIC,
    "mcp_tokens_analysis_duration_seconds": semconv.ANALYSIS_DURATION,
}
_COUNTERS = {
    "mcp_tokens_overhead_total": semconv.OVERHEAD,
    "mcp_tokens_responses_total": semconv.RESPONSES,
    "mcp_tokens_budget_crossings_total": semconv.BUDGET_CROSSINGS,
    "mcp_tokens_padding_detections_total": semconv.PADDING_DETECTIONS,
    "mcp_tokens_analysis_skipped_total": semconv.ANALYSIS_SKIPPED,
    "mcp_tokens_host_over_limit_total": semconv.HOST_OVER_LIMIT,
}
_GAUGES = {"mcp_tokens_tool_definition": semconv.TOOL_DEFINITION, "mcp_tokens_tools": semconv.TOOLS}
_ATTRIBUTES = {
    name.replace(".", "_"): name
    for name in (
        semconv.SIDE,
        semconv.DIRECTION,
        semconv.MCP_METHOD_NAME,
        semconv.GEN_AI_TOOL_NAME,
        semconv.GEN_AI_PROMPT_NAME,
        semconv.SERVER_NAME,
        semconv.TOKENS_ENCODING,
        semconv.OVERHEAD_KIND,
        semconv.TOKENS_RISK,
        semconv.BUDGET_LEVEL,
        semconv.PADDING_REASON,
        semconv.SKIP_REASON,
        semconv.ERROR_TYPE,
        semconv.HOST,
        semconv.HOST_LIMIT,
    )
}


@dataclass
class _HistogramParts:
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    count: float = 0.0
    total: float = 0.0

    def histogram(self) -> Histogram:
        bounds = sorted(b for b in self.buckets if math.isfinite(b))
        cumulative = [self.buckets[b] for b in bounds]
        everything = self.buckets.get(math.inf, self.count)
        counts, below = [], 0.0
        for value in [*cumulative, everything]:
            counts.append(max(0, round(value - below)))
            below = max(below, value)
        return Histogram(round(self.count), self.total, tuple(bounds), tuple(counts))


def snapshot_from_text(text: str, max_series: int = MAX_SERIES) -> Snapshot:
    """Raises ValueError when the text is not the Prometheus exposition format."""
    numbers: dict[SeriesKey, float] = {}
    histograms: dict[SeriesKey, _HistogramParts] = {}
    dropped = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            target = _place(sample.name, dict(sample.labels))
            if target is None:
                continue
            key, part, le = target
            known = key in numbers or key in histograms
            if not known and len(numbers) + len(histograms) >= max_series:
                dropped += 1
                continue
            value = float(sample.value)
            if part == "counter":
                numbers[key] = numbers.get(key, 0.0) + value
            elif part == "gauge":
                numbers[key] = max(numbers.get(key, value), value)
            else:
                _add_part(histograms.setdefault(key, _HistogramParts()), part, value, le)
    series: dict[SeriesKey, Value] = dict(numbers)
    series.update((key, parts.histogram()) for key, parts in histograms.items())
    return Snapshot(series, "", dropped)


def _add_part(parts: _HistogramParts, part: str, value: float, le: float | None) -> None:
    if part == "bucket" and le is not None:
        parts.buckets[le] = parts.buckets.get(le, 0.0) + value
    elif part == "count":
        parts.count += value
    elif part == "sum":
        parts.total += value


def _place(name: str, labels: dict[str, str]) -> tuple[SeriesKey, str, float | None] | None:
    """(series key, counter|gauge|bucket|sum|count, le) of one sample, None when not reported."""
    if name in _COUNTERS:
        return (_COUNTERS[name], _attributes(labels)), "counter", None
    if name in _GAUGES:
        return (_GAUGES[name], _attributes(labels)), "gauge", None
    base, _, suffix = name.rpartition("_")
    if base not in _HISTOGRAMS or suffix not in ("bucket", "sum", "count"):
        return None
    le: float | None = None
    if suffix == "bucket":
        try:
            le = float(labels.get("le", "nan"))
        except ValueError:
            return None
        if math.isnan(le):
            return None
    return (_HISTOGRAMS[base], _attributes(labels)), suffix, le


def _attributes(labels: dict[str, str]) -> Attributes:
    return tuple(sorted((_ATTRIBUTES[k], v) for k, v in labels.items() if k in _ATTRIBUTES))


def reported_names() -> Iterable[str]:
    """The Prometheus names this module reads (documentation and tests)."""
    yield from (f"{name}_{part}" for name in _HISTOGRAMS for part in ("bucket", "sum", "count"))
    yield from _COUNTERS
    yield from _GAUGES
