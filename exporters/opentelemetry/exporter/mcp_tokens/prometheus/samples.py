# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Prometheus samples as flat, mergeable values, and back into metric families.

Both exporters of this package start from the families `opentelemetry-exporter-prometheus`
builds (its `PrometheusMetricReader` on a private registry), so every name, label and `le`
string is the stock exporter's own. A family is flattened into one entry per sample, keyed by
`SampleKey`; entries from several processes are merged by key (`merge.py`) and rebuilt into
families in first-seen order, which keeps each label set's samples together and a histogram's
buckets in their order (the OpenMetrics parser Prometheus negotiates requires both).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from prometheus_client.metrics_core import Metric

Labels = tuple[tuple[str, str], ...]

# The family the stock exporter describes its resource with; one per endpoint, not merged.
TARGET_INFO = "target"


class Family(NamedTuple):
    """What a sample's family is: its name (unit included, `_total` excluded), type, help, unit."""

    name: str
    type: str
    documentation: str
    unit: str


class SampleKey(NamedTuple):
    family: Family
    sample: str
    labels: Labels

    def encode(self) -> str:
        """The key as one JSON string (the per-process files store values under it)."""
        return json.dumps([*self.family, self.sample, self.labels], ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> SampleKey:
        name, type_, documentation, unit, sample, labels = json.loads(text)
        return cls(Family(name, type_, documentation, unit), sample, tuple((k, v) for k, v in labels))


def flatten(families: Iterable[Metric]) -> tuple[list[Metric], dict[SampleKey, float]]:
    """Split collected families into the resource's `target_info` family (kept as it is) and the
    values of every other sample."""
    info: list[Metric] = []
    values: dict[SampleKey, float] = {}
    for metric in families:
        if metric.name == TARGET_INFO and metric.type == "info":
            info.append(metric)
            continue
        family = Family(metric.name, metric.type, metric.documentation, metric.unit)
        for sample in metric.samples:
            values[SampleKey(family, sample.name, tuple(sample.labels.items()))] = float(sample.value)
    return info, values


def rebuild(values: Mapping[SampleKey, float]) -> list[Metric]:
    """Families again, in the order their samples first appear in `values`."""
    families: dict[Family, Metric] = {}
    for key, value in values.items():
        metric = families.get(key.family)
        if metric is None:
            family = key.family
            metric = families[family] = Metric(family.name, family.documentation, family.type, family.unit)
        metric.add_sample(key.sample, dict(key.labels), value)
    return list(families.values())
