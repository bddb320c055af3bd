# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A run's token economics, per operation: the pure model behind every report format.

`build_report(snapshot, ...)` reads the series of the metrics contract (docs/telemetry.md)
and groups them per side, server, method and tool (or prompt):

- calls and token sums are exact (histogram `_count`/`_sum`, counters);
- p50/p95 are bucket estimates (linear interpolation within the payload histogram's
  buckets, kept within the exact min and max);
- max is exact when the source has the histogram's max (the exporter: OpenTelemetry keeps
  it); from Prometheus text it is the smallest bucket bound that holds every response.

Series that carry no server (padding, durations) join the one row with the same side,
method and target; when several servers share a tool name they stay unattributed
(server ""), never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opentelemetry.instrumentation.mcp_tokens import semconv

from .economics import Price, UnusedTools, unused_tools
from .hostcap import HostCap, host_cap
from .hostlimits import HostLimits, host_limits
from .rows import RISK_ORDER, BudgetRow, CostRow, DefinitionRow, OperationRow, SideTotals
from .series import Histogram, Snapshot

# Responses whose size is content a model reads; listings are reported as definition tokens.
GATED_METHODS = frozenset({"tools/call", "resources/read", "prompts/get"})
_SORT_METHODS = {"tools/call": 0, "resources/read": 1, "prompts/get": 2, "tools/list": 3}


@dataclass(frozen=True)
class Failure:
    rule: str  # "risk", "padding" or "host_cap"
    side: str
    server: str
    method: str
    target: str
    detail: str


@dataclass(frozen=True)
class Verdict:
    passed: bool
    fail_on: str | None
    fail_on_padding: bool
    exit_code: int
    failures: tuple[Failure, ...] = ()
    fail_on_host_cap: bool = False


@dataclass(frozen=True)
class Report:
    service: str
    generated_at: str
    rows: tuple[OperationRow, ...]
    budgets: tuple[BudgetRow, ...]
    crossings: dict[tuple[str, str], int]
    definitions: tuple[DefinitionRow, ...]
    costs: tuple[CostRow, ...]
    totals: tuple[SideTotals, ...]
    verdict: Verdict
    dropped_series: int = 0
    unused: tuple[UnusedTools, ...] = ()
    price: Price | None = None
    host_cap: HostCap | None = None
    hosts: HostLimits | None = None


def build_report(
    snapshot: Snapshot,
    generated_at: str = "",
    fail_on: str | None = None,
    fail_on_padding: bool = False,
    fail_exit_code: int = 1,
    *,
    price: Price | None = None,
    host_cap_tokens: int | None = semconv.HOST_RESULT_CAP,
    fail_on_host_cap: bool = False,
    hosts: Sequence[str] = (),
) -> Report:
    """`host_cap_tokens`: the result cap of the hosts to check against (None: not checked);
    `fail_on_host_cap`: a response over it fails the verdict; `hosts`: the hosts (engine/hosts.py)
    whose tool limits each server's tool count is compared with."""
    rows = _operation_rows(snapshot)
    definitions = _definitions(snapshot)
    capped = host_cap(rows, host_cap_tokens) if host_cap_tokens else None
    return Report(
        unused=unused_tools(rows, definitions),
        price=price,
        host_cap=capped,
        hosts=host_limits(snapshot, hosts),
        service=snapshot.service,
        generated_at=generated_at,
        rows=rows,
        budgets=_budgets(snapshot),
        crossings=_crossings(snapshot),
        definitions=definitions,
        costs=_costs(snapshot),
        totals=_totals(rows, definitions),
        verdict=judge(rows, fail_on, fail_on_padding, fail_exit_code, capped if fail_on_host_cap else None),
        dropped_series=snapshot.dropped_series,
    )


# --- operations ------------------------------------------------------------------------------
class _Rows:
    def __init__(self) -> None:
        self.by_key: dict[tuple[str, str, str, str], OperationRow] = {}

    def get(self, side: str, server: str, method: str, target: str) -> OperationRow:
        key = (side, server, method, target)
        row = self.by_key.get(key)
        if row is None:
            row = self.by_key[key] = OperationRow(side, server, method, target)
        return row

    def unique(self, side: str, method: str, target: str) -> OperationRow | None:
        found = [r for r in self.by_key.values() if (r.side, r.method, r.target) == (side, method, target)]
        return found[0] if len(found) == 1 else None


def _target(attributes: dict[str, str]) -> str:
    return attributes.get(semconv.GEN_AI_TOOL_NAME) or attributes.get(semconv.GEN_AI_PROMPT_NAME) or ""


def _row_of(rows: _Rows, attributes: dict[str, str]) -> OperationRow:
    return rows.get(
        attributes.get(semconv.SIDE, ""),
        attributes.get(semconv.SERVER_NAME, ""),
        attributes.get(semconv.MCP_METHOD_NAME, ""),
        _target(attributes),
    )


def _operation_rows(snapshot: Snapshot) -> tuple[OperationRow, ...]:
    rows = _Rows()
    for attributes, value in snapshot.items(semconv.PAYLOAD):
        if not isinstance(value, Histogram):
            continue
        row = _row_of(rows, attributes)
        if attributes.get(semconv.DIRECTION) == semconv.DIRECTION_RESPONSE:
            row.calls += value.count
            row.response_tokens += value.total
            row.response = value if row.response is None else row.response.merged(value)
            row.encodings.add(attributes.get(semconv.TOKENS_ENCODING, ""))
        else:
            row.request_tokens += value.total
    for attributes, value in _numbers(snapshot, semconv.RESPONSES):
        _add(_row_of(rows, attributes).risk, attributes.get(semconv.TOKENS_RISK, ""), round(value))
    for attributes, value in _numbers(snapshot, semconv.OVERHEAD):
        _add(_row_of(rows, attributes).overhead, attributes.get(semconv.OVERHEAD_KIND, ""), value)
    _attach_padding(rows, snapshot)
    _attach_durations(rows, snapshot)
    return tuple(sorted(rows.by_key.values(), key=_row_order))


def _attach_padding(rows: _Rows, snapshot: Snapshot) -> None:
    for attributes, value in _numbers(snapshot, semconv.PADDING_DETECTIONS):
        side, method = attributes.get(semconv.SIDE, ""), attributes.get(semconv.MCP_METHOD_NAME, "")
        target = _target(attributes)
        row = rows.unique(side, method, target) or rows.get(side, "", method, target)
        _add(row.padding, attributes.get(semconv.PADDING_REASON, ""), round(value))


def _attach_durations(rows: _Rows, snapshot: Snapshot) -> None:
    for side, name in (
        (semconv.SIDE_CLIENT, semconv.CLIENT_OPERATION_DURATION),
        (semconv.SIDE_SERVER, semconv.SERVER_OPERATION_DURATION),
    ):
        for attributes, value in snapshot.items(name):
            if not isinstance(value, Histogram):
                continue
            row = rows.unique(side, attributes.get(semconv.MCP_METHOD_NAME, ""), _target(attributes))
            if row is None:  # not analysed (initialize, ping), or ambiguous between servers
                continue
            row.duration = value if row.duration is None else row.duration.merged(value)
            if attributes.get(semconv.ERROR_TYPE):
                row.errors += value.count


def _row_order(row: OperationRow) -> tuple[str, str, int, float, str, str]:
    method = _SORT_METHODS.get(row.method, 9)
    return (row.side, row.server, method, -row.response_tokens, row.method, row.target)


def _numbers(snapshot: Snapshot, name: str) -> Iterable[tuple[dict[str, str], float]]:
    for attributes, value in snapshot.items(name):
        if isinstance(value, float):
            yield attributes, value


def _add(counts: dict[str, float] | dict[str, int], key: str, value: float) -> None:
    counts[key] = counts.get(key, 0) + value  # type: ignore[assignment]


# --- budgets, definitions, cost ---------------------------------------------------------------
def _budgets(snapshot: Snapshot) -> tuple[BudgetRow, ...]:
    found: dict[tuple[str, str], Histogram] = {}
    for attributes, value in snapshot.items(semconv.BUDGET_UTILIZATION_METRIC):
        if isinstance(value, Histogram):
            key = (attributes.get(semconv.SIDE, ""), attributes.get(semconv.SERVER_NAME, ""))
            found[key] = value if key not in found else found[key].merged(value)
    return tuple(
        BudgetRow(
            side,
            server,
            histogram.count,
            histogram.upper_bound(),
            histogram.maximum is not None,
            histogram.quantile(0.95),
            histogram.total / histogram.count if histogram.count else None,
        )
        for (side, server), histogram in sorted(found.items())
    )


def _crossings(snapshot: Snapshot) -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = defaultdict(int)
    for attributes, value in _numbers(snapshot, semconv.BUDGET_CROSSINGS):
        found[(attributes.get(semconv.SIDE, ""), attributes.get(semconv.BUDGET_LEVEL, ""))] += round(value)
    return dict(sorted(found.items()))


def _definitions(snapshot: Snapshot) -> tuple[DefinitionRow, ...]:
    rows = [
        DefinitionRow(
            attributes.get(semconv.SIDE, ""),
            attributes.get(semconv.SERVER_NAME, ""),
            attributes.get(semconv.GEN_AI_TOOL_NAME, ""),
            value,
        )
        for attributes, value in _numbers(snapshot, semconv.TOOL_DEFINITION)
        if value > 0  # 0: a tool that left the listing (a gauge series cannot be deleted)
    ]
    return tuple(sorted(rows, key=lambda r: (r.side, r.server, -r.tokens, r.tool)))


def _costs(snapshot: Snapshot) -> tuple[CostRow, ...]:
    rows: dict[tuple[str, str], CostRow] = {}

    def row(attributes: dict[str, str]) -> CostRow:
        key = (attributes.get(semconv.SIDE, ""), attributes.get(semconv.MCP_METHOD_NAME, ""))
        return rows.setdefault(key, CostRow(*key))

    for attributes, value in snapshot.items(semconv.ANALYSIS_DURATION):
        if isinstance(value, Histogram):
            cost = row(attributes)
            cost.analyses += value.count
            cost.seconds += value.total
            top = value.upper_bound()
            if top is not None:
                cost.max_seconds = top if cost.max_seconds is None else max(cost.max_seconds, top)
    for attributes, value in _numbers(snapshot, semconv.ANALYSIS_SKIPPED):
        _add(row(attributes).skipped, attributes.get(semconv.SKIP_REASON, ""), round(value))
    return tuple(rows[key] for key in sorted(rows))


def _totals(rows: tuple[OperationRow, ...], definitions: tuple[DefinitionRow, ...]) -> tuple[SideTotals, ...]:
    sides = sorted({row.side for row in rows} | {d.side for d in definitions})
    return tuple(
        SideTotals(
            side,
            sum(r.calls for r in rows if r.side == side),
            sum(r.response_tokens for r in rows if r.side == side),
            sum(r.request_tokens for r in rows if r.side == side),
            sum(r.overhead_tokens for r in rows if r.side == side),
            sum(r.padding_count for r in rows if r.side == side),
            sum(d.tokens for d in definitions if d.side == side),
        )
        for side in sides
    )


# --- verdict ----------------------------------------------------------------------------------
def judge(
    rows: Iterable[OperationRow],
    fail_on: str | None,
    fail_on_padding: bool,
    exit_code: int,
    host_cap_gate: HostCap | None = None,
) -> Verdict:
    """Fails when a tool call, resource read or prompt had a response at or above `fail_on`
    (the tier the instrumentation assigned, with its thresholds), with `fail_on_padding` when
    any payload had a padding finding, and with `host_cap_gate` when a response may have been
    over the cap (a count known only as a range fails too: the gate does not guess low)."""
    failures: list[Failure] = []
    threshold = RISK_ORDER.index(fail_on) if fail_on in RISK_ORDER else None
    for row in rows:
        worst = row.worst_risk
        gated = threshold is not None and row.method in GATED_METHODS
        if gated and worst is not None and RISK_ORDER.index(worst) >= (threshold or 0):
            at_or_above = sum(row.risk.get(tier, 0) for tier in RISK_ORDER[threshold:])
            detail = f"{at_or_above} of {row.calls} responses at or above {fail_on} (worst {worst})"
            failures.append(Failure("risk", row.side, row.server, row.method, row.target, detail))
        if fail_on_padding and row.padding_count:
            reasons = ", ".join(f"{reason} {count}" for reason, count in sorted(row.padding.items()))
            failures.append(Failure("padding", row.side, row.server, row.method, row.target, reasons))
    if host_cap_gate is not None:
        failures += _over_cap_failures(host_cap_gate)
    return Verdict(
        not failures,
        fail_on,
        fail_on_padding,
        exit_code if failures else 0,
        tuple(failures),
        fail_on_host_cap=host_cap_gate is not None,
    )


def _over_cap_failures(capped: HostCap) -> list[Failure]:
    return [
        Failure(
            "host_cap",
            over.row.side,
            over.row.server,
            over.row.method,
            over.row.target,
            f"{over.over.text()} of {over.row.calls:,} responses over {capped.tokens:,} tokens",
        )
        for over in capped.rows
    ]
