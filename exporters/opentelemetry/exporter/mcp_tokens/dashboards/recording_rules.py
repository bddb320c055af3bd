# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Recording rules (`level:metric:operations`): pre-aggregated series for long-range views.

The level lists every label the output keeps; `_total` is dropped under `rate()`.
Alerts do not read these (see `queries`), so loading them is optional.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import names
from .economics import (
    SERVER_LABELS,
    TOOL_LABELS,
    UNUSED_WINDOW,
    called,
    count_per_server,
    listed_tools,
    never_called,
    per_server_or_zero,
    share_of_listing,
)
from .economics import tool_calls as calls_per_tool
from .promql import eq, rate, series, sum_by
from .queries import RULE_WINDOW, definition_tax, overhead_ratio
from .settings import GeneratorSettings


@dataclass(frozen=True)
class RecordingRule:
    """A `level:metric:operations` rule; `keep` is the level."""

    keep: tuple[str, ...]
    metric: str
    operations: str
    expr: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def record(self) -> str:
        return f"{'_'.join(self.keep)}:{self.metric}:{self.operations}"


def recording_rules(settings: GeneratorSettings) -> tuple[RecordingRule, ...]:
    """Pre-aggregated series for long-range views and federation (alerts do not need them)."""
    traffic = (names.JOB, names.SIDE, names.SERVER, names.METHOD, names.DIRECTION)
    per_tool = (names.JOB, names.SIDE, names.SERVER, names.TOOL, names.DIRECTION)
    tool_calls = (eq(names.METHOD, names.TOOLS_CALL),)
    buckets = RecordingRule(
        keep=(*per_tool, names.LE),
        metric=f"{names.PAYLOAD}_bucket",
        operations=f"rate{RULE_WINDOW}",
        expr=sum_by((*per_tool, names.LE), rate(series(f"{names.PAYLOAD}_bucket", tool_calls), RULE_WINDOW)),
    )
    quantiles = tuple(
        RecordingRule(
            keep=(*per_tool, "quantile"),
            metric=names.PAYLOAD,
            operations="histogram_quantile",
            expr=f"histogram_quantile({q}, {buckets.record})",
            labels={"quantile": str(q)},
        )
        for q in (0.5, 0.95, 0.99)
    )
    budget_keep = (names.JOB, names.SIDE, names.SERVER)
    budget_buckets = RecordingRule(
        keep=(*budget_keep, names.LE),
        metric=f"{names.BUDGET_UTILIZATION}_bucket",
        operations=f"rate{RULE_WINDOW}",
        # Either name, so the rule works whether metrics arrive by scrape or by OTLP.
        expr=sum_by(
            (*budget_keep, names.LE),
            f"{rate(series(f'{names.BUDGET_UTILIZATION}_bucket'), RULE_WINDOW)}\nor "
            f"{rate(series(f'{names.BUDGET_UTILIZATION_OTLP}_bucket'), RULE_WINDOW)}",
        ),
    )
    budget_quantiles = tuple(
        RecordingRule(
            keep=(*budget_keep, "quantile"),
            metric=names.BUDGET_UTILIZATION,
            operations="histogram_quantile",
            expr=f"histogram_quantile({q}, {budget_buckets.record})",
            labels={"quantile": str(q)},
        )
        for q in (0.5, 0.9, 0.99)
    )
    definitions = RecordingRule(
        keep=(names.JOB, names.SIDE, names.SERVER),
        metric=names.TOOL_DEFINITION,
        operations="sum",
        expr=definition_tax(RULE_WINDOW),
    )
    return (
        RecordingRule(
            keep=traffic,
            metric=f"{names.PAYLOAD}_sum",
            operations=f"rate{RULE_WINDOW}",
            expr=sum_by(traffic, rate(series(f"{names.PAYLOAD}_sum"), RULE_WINDOW)),
        ),
        buckets,
        *quantiles,
        RecordingRule(
            keep=(names.JOB, names.SIDE, names.SERVER, names.TOOL, names.RISK),
            metric=names.RESPONSES_TOTAL.removesuffix("_total"),
            operations=f"rate{RULE_WINDOW}",
            expr=sum_by(
                (names.JOB, names.SIDE, names.SERVER, names.TOOL, names.RISK),
                rate(series(names.RESPONSES_TOTAL, tool_calls), RULE_WINDOW),
            ),
        ),
        RecordingRule(
            keep=(names.JOB, names.SIDE, names.SERVER, names.METHOD, names.TOOL),
            metric=f"{names.OVERHEAD_TOTAL.removesuffix('_total')}_per_{names.PAYLOAD}",
            operations=f"ratio_rate{RULE_WINDOW}",
            expr=overhead_ratio(RULE_WINDOW),
        ),
        budget_buckets,
        *budget_quantiles,
        definitions,
        RecordingRule(
            keep=(names.JOB, names.SIDE, names.SERVER),
            metric=f"{names.TOOL_DEFINITION}_per_context_window",
            operations="ratio",
            expr=f"{definitions.record}\n/ {settings.context_window}",
        ),
        *economics_rules(),
    )


# --- tool economics (economics.py) ------------------------------------------------------------
def economics_rules() -> tuple[RecordingRule, ...]:
    """Unused-tool tax per tool and server over `UNUSED_WINDOW` (the query is heavy: an
    `unless` over every tool's definition and call counter)."""
    calls = RecordingRule(
        keep=TOOL_LABELS,
        metric=f"{names.PAYLOAD}_count",
        operations=f"tools_call_increase{UNUSED_WINDOW}",
        expr=calls_per_tool(UNUSED_WINDOW),
    )
    listed = RecordingRule(
        keep=TOOL_LABELS, metric=names.TOOL_DEFINITION, operations="listed", expr=listed_tools()
    )
    unused = RecordingRule(
        keep=TOOL_LABELS,
        metric=names.TOOL_DEFINITION,
        operations=f"never_called{UNUSED_WINDOW}",
        expr=never_called(listed.record, calls.record),
    )
    return (
        calls,
        listed,
        unused,
        RecordingRule(
            keep=SERVER_LABELS,
            metric=names.TOOL_DEFINITION,
            operations="listed_count",
            expr=count_per_server(listed.record),
        ),
        RecordingRule(
            keep=SERVER_LABELS,
            metric=names.TOOL_DEFINITION,
            operations=f"called_count{UNUSED_WINDOW}",
            expr=per_server_or_zero("count", called(listed.record, calls.record), listed.record),
        ),
        RecordingRule(
            keep=SERVER_LABELS,
            metric=names.TOOL_DEFINITION,
            operations=f"never_called_sum{UNUSED_WINDOW}",
            expr=per_server_or_zero("sum", unused.record, listed.record),
        ),
        RecordingRule(
            keep=SERVER_LABELS,
            metric=f"{names.TOOL_DEFINITION}_never_called_per_listed",
            operations=f"ratio{UNUSED_WINDOW}",
            expr=share_of_listing(unused.record, listed.record),
        ),
    )
