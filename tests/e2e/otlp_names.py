# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The Prometheus names an OTLP metric gets on its way through an OpenTelemetry Collector
(`prometheusremotewrite` exporter) or Prometheus' own OTLP receiver: the rules of
prometheus/otlptranslator (`normalizeName`, strategy UnderscoreEscapingWithSuffixes, the
default of both), for the units OpenTelemetry instrumentations use. No Collector can be
installed on this machine, so the e2e tests apply these rules to what the SDK exports.

- The name is split on every character outside `[a-zA-Z0-9:]` (`_` included) and the pieces
  are joined with `_`.
- The unit: `{...}` annotations are dropped; `s` is `seconds`, `By` `bytes`, ... (the table
  below); `a/b` is `a_per_b`; `1` adds nothing. The unit is appended unless a piece already
  equals it.
- Monotonic sums end in `_total`; gauges of unit `1` end in `_ratio` (only gauges: histograms
  and sums of unit 1 do not, in current releases; releases before 2024 added it to every
  metric of unit 1).
"""

from __future__ import annotations

import re

from .otlp_receiver import MetricDescriptor

UNITS = {
    "d": "days",
    "h": "hours",
    "min": "minutes",
    "s": "seconds",
    "ms": "milliseconds",
    "us": "microseconds",
    "ns": "nanoseconds",
    "By": "bytes",
    "KiBy": "kibibytes",
    "MiBy": "mebibytes",
    "GiBy": "gibibytes",
    "KBy": "kilobytes",
    "MBy": "megabytes",
    "GBy": "gigabytes",
    "m": "meters",
    "V": "volts",
    "A": "amperes",
    "J": "joules",
    "W": "watts",
    "g": "grams",
    "Cel": "celsius",
    "Hz": "hertz",
    "1": "",
    "%": "percent",
}
PER_UNITS = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month", "y": "year"}
_SEPARATORS = re.compile(r"[^a-zA-Z0-9:]+")


def _unit_tokens(unit: str) -> list[str]:
    unit = re.sub(r"\{[^}]*\}", "", unit).strip()
    if not unit:
        return []
    main, _, per = unit.partition("/")
    tokens = [UNITS.get(main, main)] if main else []
    if per:
        tokens.append("per_" + PER_UNITS.get(per, per))
    return [token for token in tokens if token]


def collector_name(metric: MetricDescriptor) -> str:
    """The family name (without `_bucket`/`_sum`/`_count`) a Collector gives `metric`."""
    tokens = [token for token in _SEPARATORS.split(metric.name) if token]
    for unit in _unit_tokens(metric.unit):
        if unit not in tokens:
            tokens.append(unit)
    if metric.kind == "sum" and metric.monotonic:
        tokens = [token for token in tokens if token != "total"] + ["total"]
    if metric.kind == "gauge" and metric.unit == "1":
        tokens = [token for token in tokens if token != "ratio"] + ["ratio"]
    return "_".join(tokens)
