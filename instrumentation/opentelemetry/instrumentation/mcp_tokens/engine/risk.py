# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Risk tiers of a response by its token count.

A response's tier says how likely it is to push earlier context (system rules, the
conversation) out of the model's attention: low <= 1000 < medium <= 4000 < high <= 8000
< critical, by default.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class RiskTier(str, Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {RiskTier.LOW: 0, RiskTier.MEDIUM: 1, RiskTier.HIGH: 2, RiskTier.CRITICAL: 3}


@dataclass(frozen=True)
class RiskThresholds:
    """Upper bounds (inclusive) of the low, medium and high tiers; above `high` is critical."""

    low: int = 1000
    medium: int = 4000
    high: int = 8000

    def __post_init__(self) -> None:
        if not 0 < self.low < self.medium < self.high:
            raise ValueError(
                f"risk thresholds must be increasing positive integers, got "
                f"{self.low},{self.medium},{self.high}"
            )

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
