# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report as titled tables of plain-text cells, shared by the terminal, Markdown, text and
HTML renderers (each escapes the cells its own way; tool and server names come from peers).

Every table is cut at `max_rows` rows; the JSON report always has every row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.exporter.mcp_tokens.textformat import approx, number, percent, seconds
from opentelemetry.instrumentation.mcp_tokens.semconv import HOST_RESULT_CAP

from .economics import server_costs, tool_calls
from .model import Report
from .rows import RISK_ORDER, OperationRow

ESTIMATE_NOTE = (
    "Calls and token sums are exact. p50≈ and p95≈ are estimates from the histogram buckets; "
    "max is the exact largest response."
)


@dataclass(frozen=True)
class Table:
    title: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    numeric: frozenset[int] = frozenset()  # right-aligned columns
    names: frozenset[int] = frozenset()  # columns of peer-supplied names
    omitted: int = 0
    empty: str = "none"


def risk_cell(row: OperationRow) -> str:
    return " · ".join(f"{tier} {row.risk[tier]:,}" for tier in RISK_ORDER if row.risk.get(tier)) or "—"


def overhead_cell(row: OperationRow) -> str:
    if not row.overhead_tokens:
        return "—"
    kinds = ", ".join(f"{kind} {number(tokens)}" for kind, tokens in sorted(row.overhead.items()) if tokens)
    return f"{kinds} ({row.overhead_ratio:.1%})"


def padding_cell(row: OperationRow) -> str:
    return ", ".join(f"{reason} {count:,}" for reason, count in sorted(row.padding.items()) if count) or "—"


def max_cell(row: OperationRow) -> str:
    value = row.max
    if value is None:
        return "—"
    return number(value) if row.max_is_exact else "≤" + number(value)


def headline(report: Report) -> list[str]:
    service = report.service or "unknown service"
    lines = [f"mcp-tokens report: {service}"]
    if report.generated_at:
        lines.append(f"generated {report.generated_at}")
    for totals in report.totals:
        lines.append(
            f"{totals.side}: {totals.calls:,} responses · {number(totals.response_tokens)} response tokens · "
            f"{number(totals.request_tokens)} request tokens · {number(totals.overhead_tokens)} overhead · "
            f"{totals.padding:,} padding findings · {number(totals.definition_tokens)} definition tokens"
        )
    for unused in report.unused:
        lines.append(f"{unused_title(unused.side, unused.server)}: {unused.summary()}")
    if report.host_cap is not None and report.totals:
        lines.append(f"{HOST_CAP_TITLE}: {report.host_cap.summary()}")
    if report.hosts is not None:
        lines.extend(f"{HOSTS_TITLE}: {line}" for line in report.hosts.summary())
    if not report.totals:
        lines.append("No MCP operation was analysed in this run.")
    if report.dropped_series:
        lines.append(f"{report.dropped_series:,} series over the report's limit were left out.")
    return lines


HOST_CAP_TITLE = "Responses hosts would refuse"
HOSTS_TITLE = "Host limits"


def unused_title(side: str, server: str) -> str:
    return f"Tools listed but never called ({side}, {server or '?'})"


def verdict_lines(report: Report) -> list[str]:
    verdict = report.verdict
    gates = []
    if verdict.fail_on:
        gates.append(f"risk at or above {verdict.fail_on}")
    if verdict.fail_on_padding:
        gates.append("padding")
    if verdict.fail_on_host_cap and report.host_cap is not None:
        gates.append(f"responses over {report.host_cap.tokens:,} tokens")
    if not gates:
        return []
    if verdict.passed:
        return [f"PASSED: no response hit the gates ({', '.join(gates)})."]
    lines = [f"FAILED ({', '.join(gates)}): exit code {verdict.exit_code}"]
    for failure in verdict.failures:
        where = failure.target or "-"
        server = f" on {failure.server}" if failure.server else ""
        lines.append(f"{failure.rule}: {failure.side} {failure.method} {where}{server}: {failure.detail}")
    return lines


def tables(report: Report, max_rows: int) -> list[Table]:
    return [
        *_operations(report, max_rows),
        _budgets(report, max_rows),
        _definitions(report, max_rows),
        _unused(report, max_rows),
        *_host_cap(report, max_rows),
        *_host_limits(report, max_rows),
        *_money(report, max_rows),
        _costs(report, max_rows),
    ]


def _cut(rows: Sequence[tuple[str, ...]], max_rows: int) -> tuple[tuple[tuple[str, ...], ...], int]:
    return tuple(rows[:max_rows]), max(0, len(rows) - max_rows)


OPERATION_HEADERS = (
    "Operation",
    "Tool / prompt",
    "Calls",
    "Response tokens",
    "Mean",
    "p50≈",
    "p95≈",
    "Max",
    "Risk",
    "Overhead",
    "Padding",
    "p95≈ time",
)


def _operation_cells(row: OperationRow) -> tuple[str, ...]:
    return (
        row.method,
        row.target or "-",
        f"{row.calls:,}",
        number(row.response_tokens),
        number(row.mean),
        approx(row.p50),
        approx(row.p95),
        max_cell(row),
        risk_cell(row),
        overhead_cell(row),
        padding_cell(row),
        seconds(row.duration.quantile(0.95)) if row.duration else "—",
    )


def _operations(report: Report, max_rows: int) -> list[Table]:
    """One table per side and server (the rows are sorted that way), `max_rows` rows in all."""
    groups: dict[tuple[str, str], list[OperationRow]] = {}
    for row in report.rows:
        groups.setdefault((row.side, row.server), []).append(row)
    if not groups:
        return [Table("Responses", OPERATION_HEADERS, (), empty="No MCP operation was analysed.")]
    found, budget = [], max_rows
    for (side, server), rows in groups.items():
        shown = rows[: max(0, budget)]
        budget -= len(shown)
        title = f"Responses, {side} side, server {server}" if server else f"Responses, {side} side"
        if not shown:
            title += f": {len(rows):,} rows in the JSON report"
        found.append(
            Table(
                title,
                OPERATION_HEADERS,
                tuple(_operation_cells(row) for row in shown),
                numeric=frozenset({2, 3, 4, 5, 6, 7}),
                names=frozenset({1}),
                omitted=len(rows) - len(shown),
                empty="(not shown: over the row limit)",
            )
        )
    return found


def _budgets(report: Report, max_rows: int) -> Table:
    rows = []
    for budget in report.budgets:
        crossings = ", ".join(
            f"{level} {count:,}" for (side, level), count in report.crossings.items() if side == budget.side
        )
        exact = budget.peak_is_exact or budget.peak is None
        peak = percent(budget.peak) if exact else "≤" + percent(budget.peak)
        rows.append(
            (
                budget.side,
                budget.server or "?",
                f"{budget.observations:,}",
                peak,
                "≈" + percent(budget.p95) if budget.p95 is not None else "—",
                percent(budget.mean),
                crossings or "—",
            )
        )
    shown, omitted = _cut(rows, max_rows)
    return Table(
        "Context budget utilisation (per side and server; crossings per side)",
        ("Side", "Server", "Observations", "Peak", "p95≈", "Mean", "Scopes crossing"),
        shown,
        numeric=frozenset({2, 3, 4, 5}),
        names=frozenset({1}),
        omitted=omitted,
        empty="No budget scope was charged.",
    )


def _definitions(report: Report, max_rows: int) -> Table:
    totals: dict[tuple[str, str], float] = {}
    for d in report.definitions:
        totals[(d.side, d.server)] = totals.get((d.side, d.server), 0.0) + d.tokens
    calls = tool_calls(report.rows)
    rows = []
    for d in report.definitions:
        called = calls.get((d.side, d.server, d.tool), 0)
        per_call = number(d.tokens / called) if called else "never called"
        total = number(totals[d.side, d.server])
        rows.append((d.side, d.server or "?", d.tool, number(d.tokens), total, f"{called:,}", per_call))
    shown, omitted = _cut(rows, max_rows)
    return Table(
        "Tool definition tokens (latest listing)",
        ("Side", "Server", "Tool", "Tokens", "Server total", "Calls", "Tokens per call"),
        shown,
        numeric=frozenset({3, 4, 5, 6}),
        names=frozenset({1, 2}),
        omitted=omitted,
        empty="No tools/list was analysed.",
    )


def _unused(report: Report, max_rows: int) -> Table:
    rows = [
        (
            u.side,
            u.server or "?",
            f"{len(u.never_called):,} of {u.listed:,}",
            f"{number(u.never_called_tokens)} of {number(u.definition_tokens)}",
            percent(u.never_called_share),
            ", ".join(t.tool for t in u.never_called) or "—",
        )
        for u in report.unused
    ]
    shown, omitted = _cut(rows, max_rows)
    return Table(
        "Tools listed but never called (definition tax that bought nothing)",
        ("Side", "Server", "Never called", "Their definition tokens", "Share", "Tools"),
        shown,
        numeric=frozenset({2, 3, 4}),
        names=frozenset({1, 5}),
        omitted=omitted,
        empty="No tools/list was analysed.",
    )


def _host_cap(report: Report, max_rows: int) -> list[Table]:
    capped = report.host_cap
    if capped is None:
        return []
    rows = [
        (
            r.row.side,
            r.row.server or "?",
            r.row.method,
            r.row.target or "-",
            f"{r.row.calls:,}",
            r.over.text(),
            percent(r.share),
            max_cell(r.row),
        )
        for r in capped.rows
    ]
    shown, omitted = _cut(rows, max_rows)
    return [
        Table(
            f"{HOST_CAP_TITLE}: over {capped.tokens:,} tokens"
            + (" (Claude Code's default cap)" if capped.tokens == HOST_RESULT_CAP else ""),
            ("Side", "Server", "Operation", "Tool / prompt", "Calls", "Over the cap", "Share", "Max"),
            shown,
            numeric=frozenset({4, 5, 6, 7}),
            names=frozenset({1, 3}),
            omitted=omitted,
            empty=f"No response over {capped.tokens:,} tokens.",
        )
    ]


def _host_limits(report: Report, max_rows: int) -> list[Table]:
    hosts = report.hosts
    if hosts is None:
        return []
    rows = [
        (
            r.host,
            r.limit,
            f"{r.threshold:,}" if r.threshold is not None else "?",
            r.side,
            r.server or "?",
            r.method,
            r.target or "-",
            f"{r.responses:,}",
        )
        for r in hosts.over
    ]
    rows += [
        (c.host, "tools", f"{c.limit:,}", c.side, c.server or "?", "tools/list", "-", f"{c.tools:,} tools")
        for c in hosts.tool_counts
    ]
    shown, omitted = _cut(rows, max_rows)
    return [
        Table(
            f"{HOSTS_TITLE}: what each host would refuse, cut or drop, in its own unit",
            ("Host", "Limit", "Over", "Side", "Server", "Operation", "Tool / prompt", "Responses"),
            shown,
            numeric=frozenset({2, 7}),
            names=frozenset({4, 6}),
            omitted=omitted,
            empty="Nothing over the chosen hosts' limits.",
        )
    ]


def _money(report: Report, max_rows: int) -> list[Table]:
    price = report.price
    if price is None:
        return []
    rows = [
        (
            c.side,
            c.server or "?",
            number(c.response_tokens),
            price.text(c.response_tokens),
            number(c.definition_tokens),
            price.text(c.definition_tokens),
            price.text(c.never_called_tokens),
        )
        for c in server_costs(report.rows, report.unused)
    ]
    shown, omitted = _cut(rows, max_rows)
    rate = f"{price.per_mtok:g} {price.currency}".strip()
    return [
        Table(
            f"Cost as model input at {rate} per million tokens",
            (
                "Side",
                "Server",
                "Response tokens",
                "Responses cost",
                "Definition tokens",
                "Definitions per conversation",
                "Never-called per conversation",
            ),
            shown,
            numeric=frozenset({2, 3, 4, 5, 6}),
            names=frozenset({1}),
            omitted=omitted,
            empty="No MCP traffic to price.",
        )
    ]


def _costs(report: Report, max_rows: int) -> Table:
    rows = [
        (
            cost.side,
            cost.method,
            f"{cost.analyses:,}",
            seconds(cost.seconds),
            seconds(cost.seconds / cost.analyses) if cost.analyses else "—",
            seconds(cost.max_seconds),
            ", ".join(f"{reason} {n:,}" for reason, n in sorted(cost.skipped.items()) if n) or "—",
        )
        for cost in report.costs
    ]
    shown, omitted = _cut(rows, max_rows)
    return Table(
        "Instrumentation cost (analysis off the response path)",
        ("Side", "Operation", "Analyses", "Total", "Mean", "Max", "Skipped"),
        shown,
        numeric=frozenset({2, 3, 4, 5}),
        omitted=omitted,
        empty="Nothing was analysed.",
    )
