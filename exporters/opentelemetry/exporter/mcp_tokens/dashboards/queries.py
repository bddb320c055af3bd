# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The PromQL of the alerts and recording rules: fixed windows, raw metrics.

Rules use fixed windows ([5m] and longer), never recording-rule outputs, so the
Grafana-managed copy of an alert works against a Prometheus that loads none of our rules.
"""

from __future__ import annotations

from . import names
from .promql import eq, matches, quantile, rate, series, sum_by

RULE_WINDOW = "5m"
"""The recording rules' window (their names say rate5m); alerts take theirs from AlertTiming."""

TOOL_LABELS = (names.JOB, names.SIDE, names.SERVER, names.TOOL)
EXPECTED_SKIP_REASONS = ("over_max_bytes", "no_exact_tokenizer", "backlog")
"""Skip reasons whose payloads are estimated by design (configuration, or sustained load), not lost."""
UNEXPECTED_SKIPS = f'{names.SKIP_REASON}!~"{"|".join(EXPECTED_SKIP_REASONS)}"'


def tool_responses(window: str) -> str:
    """p95 response tokens per tool: above a tier's bound means > 5% of responses are past it."""
    buckets = series(
        f"{names.PAYLOAD}_bucket", [eq(names.DIRECTION, names.RESPONSE), eq(names.METHOD, names.TOOLS_CALL)]
    )
    return quantile(0.95, TOOL_LABELS, buckets, window)


def overhead_ratio(window: str) -> str:
    """Share of response tokens that carry no data, per tool (per method for listings)."""
    keep = (names.JOB, names.SIDE, names.SERVER, names.METHOD, names.TOOL)
    response = (eq(names.DIRECTION, names.RESPONSE),)
    overhead = sum_by(keep, rate(series(names.OVERHEAD_TOTAL, response), window))
    payload = sum_by(keep, rate(series(f"{names.PAYLOAD}_sum", response), window))
    return f"{overhead}\n/\n{payload}"


def definition_tax(window: str) -> str:
    """Definition tokens per server; max first so replicas and scope versions count once."""
    keep = (names.JOB, names.SIDE, names.SERVER)
    per_tool = f"max by ({', '.join([*keep, names.TOOL])}) (max_over_time({names.TOOL_DEFINITION}[{window}]))"
    return sum_by(keep, per_tool)


def anchored_up(memory: str) -> str:
    """`up` of the targets that exported mcp-tokens metrics recently (others are not ours)."""
    target = (names.JOB, "instance")
    anchor = f"group by (job, instance) (last_over_time({names.ANALYSIS_DURATION}_count[{memory}]))"
    return f"max by ({', '.join(target)}) (up)\n* on (job, instance)\n{anchor}"


GUARD_CUT = matches(names.GUARD_ACTION, "|".join(names.GUARD_CUTS))
"""The guard's actions that change what the model receives (truncated, rejected)."""


def tool_cut_share(window: str) -> str:
    """Share of a tool's calls whose result the guard cut or refused, per side."""
    cut = sum_by(TOOL_LABELS, rate(series(names.GUARD_ACTIONS_TOTAL, (GUARD_CUT,)), window))
    calls = series(
        f"{names.PAYLOAD}_count", (eq(names.DIRECTION, names.RESPONSE), eq(names.METHOD, names.TOOLS_CALL))
    )
    return f"{cut}\n/\n{sum_by(TOOL_LABELS, rate(calls, window))}"
