# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Reading the points of one metric from an OpenTelemetry SDK in-memory reader (shared by tests)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def points_of(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, Any], Any]]:
    """(attributes, data point) of every point of metric `name` the reader holds now."""
    data = reader.get_metrics_data()
    found: list[tuple[dict[str, Any], Any]] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend((dict(p.attributes or {}), p) for p in metric.data.data_points)
    return found
