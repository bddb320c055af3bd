# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The thresholds the generated dashboards and alerts encode.

Defaults come from the instrumentation itself (`RiskThresholds`, `BudgetThresholds`,
the default context window), so an alert pages on exactly what the instrumentation
labels ``critical``. Change both together: run the instrumentation with
``OTEL_INSTRUMENTATION_MCP_TOKENS_RISK_THRESHOLDS=2000,6000,12000`` and regenerate with
``--risk-thresholds 2000,6000,12000``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import HOSTS
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import (
    DEFAULT_BUDGET_THRESHOLDS,
    DEFAULT_CONTEXT_WINDOW,
    BudgetThresholds,
)
from opentelemetry.instrumentation.mcp_tokens.engine.risk import DEFAULT_RISK_THRESHOLDS, RiskThresholds

DEFAULT_DEFINITION_SHARE = 0.1
"""A server whose tool definitions alone take more than this share of the window alerts."""
DEFAULT_OVERHEAD_SHARE = 0.25
"""A tool whose responses are more than this share overhead (whitespace, duplicates) alerts."""
DEFAULT_GUARD_CUT_SHARE = 0.1
"""A tool whose results the guard cuts or refuses in more than this share of its calls alerts."""
DEFAULT_HOST_CAP = semconv.HOST_RESULT_CAP
"""Tokens above which a host refuses a tool result (Claude Code's default MAX_MCP_OUTPUT_TOKENS)."""
DEFAULT_RUNBOOK_URL = "dashboards/runbook.md"
"""Where alerts point; pass the URL of a hosted copy (e.g. on your Git forge) to link it."""


_DURATION = re.compile(r"[0-9]+(ms|s|m|h|d|w|y)")


@dataclass(frozen=True)
class AlertTiming:
    """Windows and ``for:`` durations of the alerts.

    The defaults are for production. An end-to-end test that wants to see an alert fire
    within seconds uses `AlertTiming.fast()`; the committed files always use the defaults.
    """

    window: str = "5m"
    """rate() window of the rate-based alerts."""
    event_window: str = "10m"
    """How long one padding finding or budget crossing keeps its alert firing."""
    overhead_window: str = "30m"
    target_memory: str = "1d"
    """How long a target that once exported mcp-tokens metrics is still expected to."""
    for_override: str | None = None
    """Replaces every alert's ``for:`` (e.g. ``"0s"``)."""

    def __post_init__(self) -> None:
        for name in ("window", "event_window", "overhead_window", "target_memory", "for_override"):
            value = getattr(self, name)
            if value is not None and not _DURATION.fullmatch(value):
                raise ValueError(f"{name} must be a Prometheus duration like 5m, got {value!r}")

    def for_(self, default: str) -> str:
        return self.for_override or default

    @classmethod
    def fast(cls) -> AlertTiming:
        """Short windows and no ``for:``, for a live test with a 1 s scrape interval."""
        return cls(
            window="30s", event_window="1m", overhead_window="1m", target_memory="1h", for_override="0s"
        )


@dataclass(frozen=True)
class GeneratorSettings:
    """Every knob of the generated files; the defaults match the instrumentation's."""

    risk: RiskThresholds = field(default_factory=lambda: DEFAULT_RISK_THRESHOLDS)
    budget: BudgetThresholds = field(default_factory=lambda: DEFAULT_BUDGET_THRESHOLDS)
    context_window: int = DEFAULT_CONTEXT_WINDOW
    definition_share: float = DEFAULT_DEFINITION_SHARE
    overhead_share: float = DEFAULT_OVERHEAD_SHARE
    guard_cut_share: float = DEFAULT_GUARD_CUT_SHARE
    runbook_url: str = DEFAULT_RUNBOOK_URL
    timing: AlertTiming = field(default_factory=AlertTiming)
    host_cap: int = DEFAULT_HOST_CAP
    # Hosts (engine/hosts.py) whose tool limits the dashboards and alerts compare servers with.
    hosts: tuple[str, ...] = tuple(HOSTS)

    def __post_init__(self) -> None:
        unknown = [name for name in self.hosts if name not in HOSTS]
        if unknown:
            raise ValueError(f"unknown host {unknown[0]!r}; expected one of {', '.join(HOSTS)}")
        if isinstance(self.context_window, bool) or self.context_window <= 0:
            raise ValueError(
                f"context window must be a positive number of tokens, got {self.context_window!r}"
            )
        for name in ("definition_share", "overhead_share", "guard_cut_share"):
            share = getattr(self, name)
            if not (math.isfinite(share) and 0.0 < share < 1.0):
                raise ValueError(f"{name.replace('_', ' ')} must be a fraction in (0, 1), got {share!r}")
        if isinstance(self.host_cap, bool) or self.host_cap <= 0:
            raise ValueError(f"host cap must be a positive number of tokens, got {self.host_cap!r}")
        if not self.runbook_url or any(c.isspace() for c in self.runbook_url):
            raise ValueError(f"runbook URL must be non-empty and contain no spaces, got {self.runbook_url!r}")

    @property
    def definition_budget_tokens(self) -> int:
        """Definition tokens per server above which the definition-tax alert fires."""
        return round(self.context_window * self.definition_share)

    def runbook_link(self, anchor: str) -> str:
        return f"{self.runbook_url}#{anchor}"
