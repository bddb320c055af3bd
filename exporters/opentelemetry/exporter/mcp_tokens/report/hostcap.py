# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What hosts would refuse: responses over a host's result cap, per operation.

Hosts refuse a tool result over their cap (Claude Code: 25,000 tokens by default), so the
model gets an error instead of an answer. The count comes from the response-size histogram
(`mcp_tokens.payload`, direction response): the observations in buckets above the cap. It is
exact when the cap is a bucket bound (25,000 is one) or when no response fell in the bucket
that holds the cap; otherwise the responses in that bucket may be on either side, and the
count is given as a range. A known exact maximum at or under the cap settles it at 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from .economics import RESPONSE_METHODS
from .rows import OperationRow
from .series import Histogram


@dataclass(frozen=True)
class OverCap:
    """How many of a histogram's observations are over a cap: at least `low`, at most `high`."""

    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high

    def text(self) -> str:
        return f"{self.low:,}" if self.exact else f"{self.low:,}-{self.high:,}"


def over_cap(histogram: Histogram, cap: float) -> OverCap:
    """Observations over `cap` (strictly: a response of exactly the cap is accepted)."""
    if histogram.count <= 0 or (histogram.maximum is not None and histogram.maximum <= cap):
        return OverCap(0, 0)
    low = high = 0
    bounds = histogram.bounds
    for index, in_bucket in enumerate(histogram.counts):
        if in_bucket <= 0:
            continue
        # Past the last bound (the overflow bucket, or counts a malformed source added) the
        # lower edge is the last bound and there is no upper one.
        lower = bounds[min(index, len(bounds)) - 1] if index > 0 and bounds else None
        upper = bounds[index] if index < len(bounds) else None
        if lower is not None and lower >= cap:  # every observation in (lower, upper] is over
            low += in_bucket
            high += in_bucket
        elif upper is None or upper > cap:  # the bucket holds the cap: either side
            high += in_bucket
    return OverCap(low, high)


@dataclass(frozen=True)
class HostCapRow:
    """One operation with responses over the cap (possibly, when the count is a range)."""

    row: OperationRow
    over: OverCap

    @property
    def name(self) -> str:
        return self.row.target or self.row.method

    @property
    def share(self) -> float:
        return self.over.low / self.row.calls if self.row.calls else 0.0


@dataclass(frozen=True)
class HostCap:
    """The cap, and every tool call, resource read or prompt with responses over it."""

    tokens: int
    rows: tuple[HostCapRow, ...]  # most responses over the cap first

    @property
    def responses_over(self) -> OverCap:
        return OverCap(sum(r.over.low for r in self.rows), sum(r.over.high for r in self.rows))

    def summary(self) -> str:
        """'3 responses over 25,000 tokens (git_diff 2 of 5, search 1 of 9)'."""
        over = self.responses_over
        if not self.rows:
            return f"no response over {self.tokens:,} tokens"
        noun = "response" if over.high == 1 else "responses"
        names = ", ".join(f"{r.name} {r.over.text()} of {r.row.calls:,}" for r in self.rows)
        return f"{over.text()} {noun} over {self.tokens:,} tokens ({names})"


def host_cap(rows: tuple[OperationRow, ...], cap: int) -> HostCap:
    """The responses over `cap` tokens of every tools/call, resources/read and prompts/get row."""
    found = []
    for row in rows:
        if row.method not in RESPONSE_METHODS or row.response is None:
            continue
        over = over_cap(row.response, cap)
        if over.high > 0:
            found.append(HostCapRow(row, over))
    found.sort(key=lambda r: (-r.over.low, -r.over.high, r.row.key))
    return HostCap(cap, tuple(found))
