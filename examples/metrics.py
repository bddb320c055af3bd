# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Read an instrumented process's `/metrics` and summarise the mcp-tokens series per tool.

The summary uses only what Prometheus itself would have: histogram `_sum`/`_count`/`_bucket`
and counters, so the numbers the demo prints are the numbers a dashboard shows.
"""

from __future__ import annotations

import math
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

HOST = "127.0.0.1"
SCOPE_LABELS = ("otel_scope_name", "otel_scope_version", "otel_scope_schema_url")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float

    def matches(self, name: str, **labels: str) -> bool:
        return self.name == name and all(self.labels.get(k) == v for k, v in labels.items())


def scrape(port: int, timeout_s: float = 3.0) -> str:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=timeout_s) as response:
        return str(response.read().decode("utf-8"))


def parse(text: str) -> list[Sample]:
    return [
        Sample(sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def total(samples: Iterable[Sample], name: str, **labels: str) -> float:
    return sum(s.value for s in samples if s.matches(name, **labels))


def tool_calls_seen(samples: Iterable[Sample]) -> int:
    """tools/call responses mcp-tokens has analysed in this process."""
    return round(
        total(
            samples, "mcp_tokens_payload_count", mcp_tokens_direction="response", mcp_method_name="tools/call"
        )
    )


def wait_for_calls(port: int, expected: int, timeout_s: float) -> list[Sample]:
    """Scrape until `expected` tools/call responses were analysed (or time runs out)."""
    deadline = time.monotonic() + timeout_s
    samples: list[Sample] = []
    while True:
        try:
            samples = parse(scrape(port))
        except OSError:
            samples = []
        if tool_calls_seen(samples) >= expected or time.monotonic() >= deadline:
            return samples
        time.sleep(0.2)


def histogram_quantile(quantile: float, buckets: Mapping[float, float]) -> float:
    """Prometheus' `histogram_quantile` on cumulative buckets {upper bound: count}."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] == 0:
        return math.nan
    rank = quantile * buckets[bounds[-1]]
    lower, below = 0.0, 0.0
    for bound in bounds:
        count = buckets[bound]
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * ((rank - below) / (count - below) if count > below else 1.0)
        lower, below = bound, count
    return lower


def highest_bucket(buckets: Mapping[float, float]) -> float:
    """The smallest upper bound that holds every observation (the max is at most this)."""
    bounds = sorted(buckets)
    if not bounds:
        return math.nan
    everything = buckets[bounds[-1]]
    return next(bound for bound in bounds if buckets[bound] >= everything)


@dataclass
class OperationSummary:
    """One (method, target) on one side: what the payload histogram and counters say."""

    method: str
    target: str
    calls: int = 0
    tokens_sum: float = 0.0
    request_sum: float = 0.0
    buckets: dict[float, float] = field(default_factory=dict)
    risk: dict[str, float] = field(default_factory=dict)
    overhead: dict[str, float] = field(default_factory=dict)
    padding: dict[str, float] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return self.tokens_sum / self.calls if self.calls else math.nan

    @property
    def p50(self) -> float:
        return histogram_quantile(0.5, self.buckets)

    @property
    def max_bound(self) -> float:
        return highest_bucket(self.buckets)


def _target(labels: Mapping[str, str]) -> str:
    return labels.get("gen_ai_tool_name") or labels.get("gen_ai_prompt_name") or ""


def summarise(samples: Iterable[Sample], side: str) -> list[OperationSummary]:
    """Per (method, tool or prompt) summaries of one side's series, tools/call first."""
    rows: dict[tuple[str, str], OperationSummary] = {}

    def row(labels: Mapping[str, str]) -> OperationSummary:
        key = (labels.get("mcp_method_name", ""), _target(labels))
        return rows.setdefault(key, OperationSummary(*key))

    buckets: dict[tuple[str, str], dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for s in samples:
        labels = s.labels
        if labels.get("mcp_tokens_side", side) != side:
            continue
        response = labels.get("mcp_tokens_direction") == "response"
        if s.name == "mcp_tokens_payload_count" and response:
            row(labels).calls += round(s.value)
        elif s.name == "mcp_tokens_payload_sum":
            if response:
                row(labels).tokens_sum += s.value
            else:
                row(labels).request_sum += s.value
        elif s.name == "mcp_tokens_payload_bucket" and response:
            summary = row(labels)
            buckets[(summary.method, summary.target)][float(labels["le"])] += s.value
        elif s.name == "mcp_tokens_responses_total":
            _add(row(labels).risk, labels.get("mcp_tokens_risk", "?"), s.value)
        elif s.name == "mcp_tokens_overhead_total":
            _add(row(labels).overhead, labels.get("mcp_tokens_overhead_kind", "?"), s.value)
        elif s.name == "mcp_tokens_padding_detections_total":
            _add(row(labels).padding, labels.get("mcp_tokens_padding_reason", "?"), s.value)
    for key, found in buckets.items():
        rows[key].buckets = dict(found)
    order = {"tools/call": 0, "tools/list": 1, "resources/read": 2, "prompts/get": 3}
    return sorted(rows.values(), key=lambda r: (order.get(r.method, 9), r.method, r.target))


def _add(counts: dict[str, float], key: str, value: float) -> None:
    counts[key] = counts.get(key, 0.0) + value


# One line per family in `key_series`: the series a first look at a dashboard would show.
KEY_FAMILIES = (
    "mcp_tokens_payload_sum",
    "mcp_tokens_responses_total",
    "mcp_tokens_overhead_total",
    "mcp_tokens_tool_definition",
    "mcp_tokens_padding_detections_total",
    "mcp_tokens_budget_crossings_total",
    "mcp_client_operation_duration_seconds_count",
    "mcp_server_operation_duration_seconds_count",
)


def key_series(text: str, families: Iterable[str] = KEY_FAMILIES) -> list[str]:
    """For each family, its largest series as an exposition line, without the otel_scope_*
    labels and the labels with empty values (which Prometheus drops at ingestion)."""
    samples = parse(text)
    lines = []
    for family in families:
        found = [s for s in samples if s.name == family]
        if found:
            largest = max(found, key=lambda s: s.value)
            labels = ",".join(
                f'{name}="{_escaped(value)}"'
                for name, value in sorted(largest.labels.items())
                if value and name not in SCOPE_LABELS
            )
            lines.append(f"{family}{{{labels}}} {largest.value:g}")
    return lines


def _escaped(value: str) -> str:
    """A label value as the exposition format writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
