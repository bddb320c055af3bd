# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The HTML report's charts as inline SVG: no script, no external resource, every name escaped.

Each chart is a `<figure>` with an `<svg role="img">` that has a `<title>` and a `<desc>`,
and every bar carries its numbers twice: as visible text beside the bar and as `data-*`
attributes (the same values as the JSON report), so a screen reader, a person and a test
read the same figures. Bars are scaled to the largest value of their chart.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.exporter.mcp_tokens.textformat import number, percent, plural, printable

from .economics import RESPONSE_METHODS
from .model import Report
from .rows import BudgetRow, OperationRow

MAX_BARS = 20
WIDTH = 760
LABEL_WIDTH = 260
BAR_HEIGHT = 18
GAP = 8
TOP = 8

RISK_COLORS = {"low": "#2e7d32", "medium": "#b8860b", "high": "#e65100", "critical": "#b00020"}
UNKNOWN_COLOR = "#607d8b"
USED_COLOR = "#1565c0"
NEVER_COLOR = "#b00020"
PEAK_COLOR = "#6a1b9a"


def _e(text: str) -> str:
    return html.escape(printable(text), quote=True)


@dataclass(frozen=True)
class _Bar:
    label: str
    segments: tuple[tuple[float, str, str], ...]  # (value, colour, css class)
    text: str
    data: dict[str, str]


def charts(report: Report) -> list[str]:
    """The report's figures, each a self-contained <figure> (none when there is nothing to draw)."""
    found = [
        _response_chart(report.rows),
        _definition_chart(report),
        _budget_chart(report.budgets),
    ]
    return [chart for chart in found if chart]


def _response_chart(rows: Iterable[OperationRow]) -> str:
    shown = sorted(
        (r for r in rows if r.method in RESPONSE_METHODS and r.calls),
        key=lambda r: (-r.response_tokens, r.key),
    )[:MAX_BARS]
    bars = [
        _Bar(
            label=f"{row.target or row.method} ({row.side}, {row.server or '?'})",
            segments=((row.response_tokens, RISK_COLORS.get(row.worst_risk or "", UNKNOWN_COLOR), "tokens"),),
            text=_response_text(row),
            data={
                "side": row.side,
                "server": row.server,
                "method": row.method,
                "target": row.target,
                "response-tokens": _value(row.response_tokens),
                "calls": str(row.calls),
                "risk": row.worst_risk or "",
            },
        )
        for row in shown
    ]
    legend = ", ".join(f"{tier} {colour}" for tier, colour in RISK_COLORS.items())
    return _figure(
        "chart-responses",
        "Response tokens by tool",
        f"Horizontal bars: each tool's response tokens in this run, coloured by its worst risk tier "
        f"({legend}).",
        bars,
    )


def _response_text(row: OperationRow) -> str:
    calls = plural(row.calls, "call")
    return f"{number(row.response_tokens)} tokens · {calls} · worst {row.worst_risk or '?'}"


def _definition_chart(report: Report) -> str:
    bars = []
    for unused in report.unused:
        used = unused.definition_tokens - unused.never_called_tokens
        bars.append(
            _Bar(
                label=f"{unused.server or '?'} ({unused.side})",
                segments=(
                    (used, USED_COLOR, "used"),
                    (unused.never_called_tokens, NEVER_COLOR, "never-called"),
                ),
                text=(
                    f"called {number(used)} · never called {number(unused.never_called_tokens)} "
                    f"({percent(unused.never_called_share)}) · "
                    f"{len(unused.never_called)} of {unused.listed} tools never called"
                ),
                data={
                    "side": unused.side,
                    "server": unused.server,
                    "definition-tokens": _value(unused.definition_tokens),
                    "used-tokens": _value(used),
                    "never-called-tokens": _value(unused.never_called_tokens),
                    "tools-listed": str(unused.listed),
                    "tools-never-called": str(len(unused.never_called)),
                },
            )
        )
    return _figure(
        "chart-definitions",
        "Definition tax: tools called versus never called",
        "Stacked bars per server: definition tokens of the tools called in this run (blue) and of the tools "
        "listed but never called (red), which every conversation pays for nothing.",
        bars,
    )


def _budget_chart(budgets: Iterable[BudgetRow]) -> str:
    bars = [
        _Bar(
            label=f"{budget.server or '?'} ({budget.side})",
            segments=((_finite(budget.peak), PEAK_COLOR, "peak"),),
            text=_budget_text(budget),
            data={
                "side": budget.side,
                "server": budget.server,
                "peak": _value(budget.peak),
                "mean": _value(budget.mean),
                "observations": str(budget.observations),
            },
        )
        for budget in budgets
    ]
    return _figure(
        "chart-budgets",
        "Context budget utilisation",
        "Bars per side and server: the peak share of a context window that MCP payloads filled "
        "(100% is the whole window; the dashed line marks it).",
        bars,
        full_scale=1.0,
    )


def _budget_text(budget: BudgetRow) -> str:
    bound = "" if budget.peak_is_exact else "≤"
    return f"peak {bound}{percent(budget.peak)} · mean {percent(budget.mean)}"


def _finite(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else 0.0


def _value(value: float | None) -> str:
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:.6f}".rstrip("0")


def _figure(
    css_id: str, title: str, description: str, bars: list[_Bar], full_scale: float | None = None
) -> str:
    if not bars:
        return ""
    title_id, desc_id = f"{css_id}-title", f"{css_id}-desc"
    largest = max(sum(value for value, _, _ in bar.segments) for bar in bars)
    scale_max = max(largest, full_scale or 0.0) or 1.0
    plot = WIDTH - LABEL_WIDTH - 10
    height = TOP + len(bars) * (BAR_HEIGHT * 2 + GAP) + 4
    out = [
        f'<figure class="chart" id="{css_id}">',
        f"<figcaption>{_e(title)}</figcaption>",
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" aria-labelledby="{title_id} {desc_id}">',
        f'<title id="{title_id}">{_e(title)}</title>',
        f'<desc id="{desc_id}">{_e(description)}</desc>',
    ]
    for index, bar in enumerate(bars):
        y = TOP + index * (BAR_HEIGHT * 2 + GAP)
        data = " ".join(f'data-{key}="{_e(value)}"' for key, value in bar.data.items())
        out.append(f'<g class="bar" {data}>')
        out.append(f'<text class="label" x="0" y="{y + BAR_HEIGHT - 5}">{_e(_cut(bar.label))}</text>')
        x = float(LABEL_WIDTH)
        for value, colour, css in bar.segments:
            width = plot * value / scale_max if value > 0 else 0.0
            tip = _e(f"{bar.label}: {css} {number(value, 0 if value >= 10 else 3)}")
            out.append(
                f'<rect class="{css}" x="{x:.1f}" y="{y}" width="{width:.1f}" height="{BAR_HEIGHT}" '
                f'fill="{colour}"><title>{tip}</title></rect>'
            )
            x += width
        out.append(
            f'<text class="value" x="{LABEL_WIDTH}" y="{y + BAR_HEIGHT * 2 - 4}">{_e(bar.text)}</text>'
        )
        out.append("</g>")
    if full_scale is not None:
        x = LABEL_WIDTH + plot * full_scale / scale_max
        out.append(
            f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" stroke="#444" stroke-dasharray="4 3">'
            "<title>100% of the context window</title></line>"
        )
    out += ["</svg>", "</figure>"]
    return "\n".join(out)


def _cut(label: str, limit: int = 40) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "…"
