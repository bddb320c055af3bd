# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How the samples of several processes of one server add up to one endpoint's series.

- Counters and histograms (every `_bucket`, `_count`, `_sum`) are summed over all processes,
  those still running and those that exited: a worker that exits must not take its counts
  with it, or the server's counters would go backwards.
- Listing gauges (`LISTING_GAUGES`: the tool-definition gauge, the tool count) describe a
  listing every worker sees alike; summing them would multiply the definition tax (and a
  server's tool count) by the number of workers. The value last changed wins, whichever
  process (running or exited) changed it.
- Other gauges (UpDownCounters such as active requests, process gauges) are summed over the
  processes still running, as prometheus_client's `livesum` mode does.

Each value comes with the time it last changed (Unix seconds), which only listing gauges use.
`Archive` keeps what exited processes leave behind, bounded by the series cardinality however
many processes come and go.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from enum import Enum

from .samples import Family, SampleKey

Stamped = tuple[float, float]  # (value, unix time it last changed)

# Prometheus family names of gauges that describe a listing (same in every worker).
LISTING_GAUGES = frozenset({"mcp_tokens_tool_definition", "mcp_tokens_tools"})


class Policy(Enum):
    SUM = "sum"
    MOST_RECENT = "most_recent"
    LIVE_SUM = "live_sum"


def policy(family: Family) -> Policy:
    if family.type != "gauge":
        return Policy.SUM
    return Policy.MOST_RECENT if family.name in LISTING_GAUGES else Policy.LIVE_SUM


def merge(sources: Iterable[Mapping[SampleKey, Stamped]]) -> dict[SampleKey, float]:
    """One value per sample key from the sources (the first source's order first)."""
    merged: dict[SampleKey, float] = {}
    changed: dict[SampleKey, float] = {}
    for source in sources:
        for key, (value, stamp) in source.items():
            if key not in merged:
                merged[key], changed[key] = value, stamp
            elif policy(key.family) is Policy.MOST_RECENT:
                if stamp >= changed[key]:
                    merged[key], changed[key] = value, stamp
            else:
                merged[key] += value
    return merged


class Archive:
    """What exited processes contributed and must keep contributing."""

    def __init__(self) -> None:
        self.values: dict[SampleKey, Stamped] = {}

    def fold(self, exited: Mapping[SampleKey, Stamped]) -> None:
        for key, (value, stamp) in exited.items():
            kind = policy(key.family)
            if kind is Policy.LIVE_SUM:
                continue
            held = self.values.get(key)
            if held is None:
                self.values[key] = (value, stamp)
            elif kind is Policy.SUM:
                self.values[key] = (held[0] + value, max(held[1], stamp))
            elif stamp >= held[1]:
                self.values[key] = (value, stamp)


class ChangeClock:
    """Stamps each sample of one process with the time its value last changed, so that the
    most recent listing wins across processes."""

    def __init__(self) -> None:
        self._seen: dict[SampleKey, Stamped] = {}

    def stamp(self, values: Mapping[SampleKey, float], now: float | None = None) -> dict[SampleKey, Stamped]:
        now = time.time() if now is None else now
        stamped: dict[SampleKey, Stamped] = {}
        for key, value in values.items():
            held = self._seen.get(key)
            if held is None or held[0] != value:
                held = self._seen[key] = (value, now)
            stamped[key] = held
        return stamped
