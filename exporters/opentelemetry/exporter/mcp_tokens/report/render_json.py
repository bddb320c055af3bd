# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report as a JSON document (`format: mcp-tokens.report`, `version: 1`), with every row
and a machine-readable verdict. Keys are sorted; token counts are integers; fractions and
seconds are rounded to 6 decimals; a value that is not known is null."""

from __future__ import annotations

import json
import math
from typing import Any

from .economics import Price, UnusedTools, server_costs, tool_calls
from .hostcap import HostCap
from .hostlimits import HostLimits
from .model import Report
from .rows import RISK_ORDER, OperationRow
from .series import Histogram

REPORT_FORMAT = "mcp-tokens.report"
VERSION = 1


def render_json(report: Report) -> str:
    return json.dumps(report_document(report), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def report_document(report: Report) -> dict[str, Any]:
    verdict = report.verdict
    return {
        "format": REPORT_FORMAT,
        "version": VERSION,
        "service": report.service,
        "generated_at": report.generated_at,
        "verdict": {
            "passed": verdict.passed,
            "fail_on": verdict.fail_on,
            "fail_on_padding": verdict.fail_on_padding,
            "fail_on_host_cap": verdict.fail_on_host_cap,
            "exit_code": verdict.exit_code,
            "failures": [vars(failure) for failure in verdict.failures],
        },
        "totals": [
            {
                "side": t.side,
                "calls": t.calls,
                "response_tokens": _number(t.response_tokens),
                "request_tokens": _number(t.request_tokens),
                "overhead_tokens": _number(t.overhead_tokens),
                "padding": t.padding,
                "definition_tokens": _number(t.definition_tokens),
            }
            for t in report.totals
        ],
        "operations": [_operation(row, report.price) for row in report.rows],
        "budgets": [
            {
                "side": b.side,
                "server": b.server,
                "observations": b.observations,
                "peak": _number(b.peak),
                "peak_exact": b.peak_is_exact,
                "p95_estimate": _number(b.p95),
                "mean": _number(b.mean),
            }
            for b in report.budgets
        ],
        "crossings": [
            {"side": side, "level": level, "scopes": count}
            for (side, level), count in report.crossings.items()
        ],
        "definitions": _definitions(report),
        "unused_tools": [_unused(u) for u in report.unused],
        "cost": _cost(report),
        "host_cap": _host_cap(report.host_cap),
        "hosts": _hosts(report.hosts),
        "instrumentation": [
            {
                "side": c.side,
                "method": c.method,
                "analyses": c.analyses,
                "seconds": _number(c.seconds),
                "max_seconds": _number(c.max_seconds),
                "skipped": dict(sorted(c.skipped.items())),
            }
            for c in report.costs
        ],
        "dropped_series": report.dropped_series,
    }


def _definitions(report: Report) -> list[dict[str, Any]]:
    calls = tool_calls(report.rows)
    found = []
    for d in report.definitions:
        called = calls.get((d.side, d.server, d.tool), 0)
        found.append(
            {
                "side": d.side,
                "server": d.server,
                "tool": d.tool,
                "tokens": _number(d.tokens),
                "calls": called,
                "tokens_per_call": _number(d.tokens / called) if called else None,
            }
        )
    return found


def _unused(unused: UnusedTools) -> dict[str, Any]:
    return {
        "side": unused.side,
        "server": unused.server,
        "tools_listed": unused.listed,
        "tools_called": unused.called,
        "tools_never_called": len(unused.never_called),
        "definition_tokens": _number(unused.definition_tokens),
        "never_called_tokens": _number(unused.never_called_tokens),
        "never_called_share": _number(unused.never_called_share),
        "never_called": [{"tool": t.tool, "tokens": _number(t.tokens)} for t in unused.never_called],
    }


def _hosts(hosts: HostLimits | None) -> dict[str, Any] | None:
    """Responses over each host's limits (the instrumentation's count, in the host's unit) and
    servers over a chosen host's tool limit; null when no host was chosen or counted."""
    if hosts is None:
        return None
    return {
        "hosts": list(hosts.hosts),
        "responses_over": [
            {
                "host": r.host,
                "limit": r.limit,
                "threshold": r.threshold,
                "side": r.side,
                "server": r.server,
                "method": r.method,
                "target": r.target,
                "responses": r.responses,
            }
            for r in hosts.over
        ],
        "tool_counts_over": [
            {"host": c.host, "limit": c.limit, "side": c.side, "server": c.server, "tools": c.tools}
            for c in hosts.tool_counts
        ],
    }


def _host_cap(capped: HostCap | None) -> dict[str, Any] | None:
    """Responses over the host cap (null when not checked). `over` is the least count, `over_max`
    the most: they differ only when the cap is not a bucket bound of the payload histogram."""
    if capped is None:
        return None
    total = capped.responses_over
    return {
        "tokens": capped.tokens,
        "responses_over": total.low,
        "responses_over_max": total.high,
        "exact": total.exact,
        "operations": [
            {
                "side": r.row.side,
                "server": r.row.server,
                "method": r.row.method,
                "target": r.row.target,
                "calls": r.row.calls,
                "over": r.over.low,
                "over_max": r.over.high,
                "exact": r.over.exact,
                "max": _number(r.row.max),
                "max_exact": r.row.max_is_exact,
            }
            for r in capped.rows
        ],
    }


def _cost(report: Report) -> dict[str, Any] | None:
    """Money at the configured price (null without one): responses once, definitions per conversation."""
    price = report.price
    if price is None:
        return None
    servers = server_costs(report.rows, report.unused)
    return {
        "price_per_mtok": _number(price.per_mtok),
        "currency": price.currency,
        "servers": [
            {
                "side": c.side,
                "server": c.server,
                "response_tokens": _number(c.response_tokens),
                "response_cost": _number(price.of(c.response_tokens)),
                "definition_tokens": _number(c.definition_tokens),
                "definition_cost_per_conversation": _number(price.of(c.definition_tokens)),
                "never_called_cost_per_conversation": _number(price.of(c.never_called_tokens)),
            }
            for c in servers
        ],
    }


def _operation(row: OperationRow, price: Price | None) -> dict[str, Any]:
    return {
        "side": row.side,
        "server": row.server,
        "method": row.method,
        "target": row.target,
        "calls": row.calls,
        "response_tokens": _number(row.response_tokens),
        "request_tokens": _number(row.request_tokens),
        "mean": _number(row.mean),
        "p50_estimate": _number(row.p50),
        "p95_estimate": _number(row.p95),
        "max": _number(row.max),
        "max_exact": row.max_is_exact,
        "risk": {tier: row.risk.get(tier, 0) for tier in RISK_ORDER},
        "worst_risk": row.worst_risk,
        "overhead": {kind: _number(tokens) for kind, tokens in sorted(row.overhead.items())},
        "overhead_tokens": _number(row.overhead_tokens),
        "overhead_ratio": _number(row.overhead_ratio),
        "padding": dict(sorted(row.padding.items())),
        "duration_s": _duration(row.duration),
        "errors": row.errors,
        "encodings": sorted(e for e in row.encodings if e),
        "cost": _number(price.of(row.response_tokens)) if price is not None else None,
    }


def _duration(histogram: Histogram | None) -> dict[str, Any] | None:
    if histogram is None:
        return None
    return {
        "count": histogram.count,
        "sum": _number(histogram.total),
        "p50_estimate": _number(histogram.quantile(0.5)),
        "p95_estimate": _number(histogram.quantile(0.95)),
        "max": _number(histogram.upper_bound()),
    }


def _number(value: float | int | None) -> float | int | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return round(value, 6)
