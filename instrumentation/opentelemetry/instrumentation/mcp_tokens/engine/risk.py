# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Risk tiers of a response by its token count.

A response's tier says how likely it is to push earlier context (system rules, the
conversation) out of the model's attention: low <= 1000 < medium <= 4000 < high <= 8000
< critical, by default.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple


class RiskTier(str, Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {RiskTier.LOW: 0, RiskTier.MEDIUM: 1, RiskTier.HIGH: 2, RiskTier.CRITICAL: 3}


class _Bounds(NamedTuple):
    low: int
    medium: int
    high: int


# A NamedTuple that validates in __new__: immutable and comparable like a frozen dataclass,
# at a fraction of the cost of defining one when the package is imported.
class RiskThresholds(_Bounds):
    """Upper bounds (inclusive) of the low, medium and high tiers; above `high` is critical."""

    __slots__ = ()

    def __new__(cls, low: int = 1000, medium: int = 4000, high: int = 8000) -> RiskThresholds:
        if not 0 < low < medium < high:
            raise ValueError(
                f"risk thresholds must be increasing positive integers, got {low},{medium},{high}"
            )
        return super().__new__(cls, low, medium, high)

    @classmethod
    def parse(cls, text: str) -> RiskThresholds:
        """Parse ``"1000,4000,8000"``; raises ValueError naming the bad input."""
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 3:
            raise ValueError(f"expected three comma-separated integers, got {text!r}")
        try:
            low, medium, high = (int(p) for p in parts)
        except ValueError:
            raise ValueError(f"expected three comma-separated integers, got {text!r}") from None
        return cls(low, medium, high)

    def classify(self, tokens: int) -> RiskTier:
        if tokens <= self.low:
            return RiskTier.LOW
        if tokens <= self.medium:
            return RiskTier.MEDIUM
        if tokens <= self.high:
            return RiskTier.HIGH
        return RiskTier.CRITICAL


DEFAULT_RISK_THRESHOLDS = RiskThresholds()
