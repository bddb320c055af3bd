# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The rows a report is made of: one per operation, budget, tool definition and side, and the
analysis cost. `model` builds them from a snapshot; `economics` and the renderers read them."""

from __future__ import annotations

from dataclasses import dataclass, field

from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier

from .series import Histogram

RISK_ORDER: tuple[str, ...] = tuple(tier.value for tier in RiskTier)


@dataclass
class OperationRow:
    side: str
    server: str
    method: str
    target: str
    calls: int = 0
    response_tokens: float = 0.0
    request_tokens: float = 0.0
    response: Histogram | None = None
    risk: dict[str, int] = field(default_factory=dict)
    overhead: dict[str, float] = field(default_factory=dict)
    padding: dict[str, int] = field(default_factory=dict)
    duration: Histogram | None = None
    errors: int = 0
    encodings: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.side, self.server, self.method, self.target)

    @property
    def mean(self) -> float | None:
        return self.response_tokens / self.calls if self.calls else None

    @property
    def p50(self) -> float | None:
        return self.response.quantile(0.5) if self.response else None

    @property
    def p95(self) -> float | None:
        return self.response.quantile(0.95) if self.response else None

    @property
    def max(self) -> float | None:
        return self.response.upper_bound() if self.response else None

    @property
    def max_is_exact(self) -> bool:
        return self.response is not None and self.response.maximum is not None

    @property
    def overhead_tokens(self) -> float:
        return sum(self.overhead.values())

    @property
    def overhead_ratio(self) -> float:
        return self.overhead_tokens / self.response_tokens if self.response_tokens > 0 else 0.0

    @property
    def padding_count(self) -> int:
        return sum(self.padding.values())

    @property
    def worst_risk(self) -> str | None:
        present = [tier for tier in RISK_ORDER if self.risk.get(tier, 0) > 0]
        return present[-1] if present else None


@dataclass(frozen=True)
class BudgetRow:
    side: str
    server: str
    observations: int
    peak: float | None  # exact max utilisation (exporter), or a bucket bound (Prometheus)
    peak_is_exact: bool
    p95: float | None
    mean: float | None


@dataclass(frozen=True)
class DefinitionRow:
    side: str
    server: str
    tool: str
    tokens: float


@dataclass
class CostRow:
    side: str
    method: str
    analyses: int = 0
    seconds: float = 0.0
    max_seconds: float | None = None
    skipped: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SideTotals:
    side: str
    calls: int
    response_tokens: float
    request_tokens: float
    overhead_tokens: float
    padding: int
    definition_tokens: float
