# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report as one self-contained HTML page: no script, no external resource, every cell
escaped (tool and server names come from peers and may hold markup). Its charts are inline
SVG (`render_svg`)."""

from __future__ import annotations

import html

from opentelemetry.exporter.mcp_tokens.textformat import printable

from . import layout
from .model import Report
from .render_svg import charts

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }
th, td { border-bottom: 1px solid #ddd; padding: 0.25rem 0.6rem; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 0.85rem; word-break: break-all; }
.passed { color: #17692e; } .failed { color: #b00020; } .note { color: #666; }
figure.chart { margin: 0.5rem 0 1.5rem; } figcaption { font-weight: 600; margin-bottom: 0.3rem; }
figure.chart svg { max-width: 100%; height: auto; }
svg text { font: 12px system-ui, sans-serif; fill: #222; } svg text.value { fill: #555; }
"""


def _e(text: str) -> str:
    return html.escape(printable(text), quote=True)


def render_html(report: Report, max_rows: int) -> str:
    lines = layout.headline(report)
    body = [f"<h1>{_e(lines[0])}</h1>", "<ul>", *(f"<li>{_e(line)}</li>" for line in lines[1:]), "</ul>"]
    figures = charts(report)
    if figures:
        body += ["<h2>Charts</h2>", *figures]
    for table in layout.tables(report, max_rows):
        body.append(f"<h2>{_e(table.title)}</h2>")
        if not table.rows:
            body.append(f'<p class="note">{_e(table.empty)}</p>')
            continue
        body += ["<table>", "<thead><tr>", *(_cell("th", h, i, table) for i, h in enumerate(table.headers))]
        body.append("</tr></thead><tbody>")
        for row in table.rows:
            body.append("<tr>" + "".join(_cell("td", cell, i, table) for i, cell in enumerate(row)) + "</tr>")
        body.append("</tbody></table>")
        if table.omitted:
            body.append(f'<p class="note">+{table.omitted:,} more rows in the JSON report.</p>')
    body.append(f'<p class="note">{_e(layout.ESTIMATE_NOTE)}</p>')
    verdict = layout.verdict_lines(report)
    if verdict:
        status = "passed" if report.verdict.passed else "failed"
        body.append(f'<p class="{status}"><strong>{_e(verdict[0])}</strong></p>')
        body += ["<ul>", *(f"<li>{_e(line)}</li>" for line in verdict[1:]), "</ul>"]
    title = _e(lines[0])
    head = f'<head><meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style></head>'
    return f'<!DOCTYPE html>\n<html lang="en">{head}\n<body>\n' + "\n".join(body) + "\n</body></html>\n"


def _cell(tag: str, text: str, index: int, table: layout.Table) -> str:
    css = ' class="n"' if index in table.numeric else ""
    content = f"<code>{_e(text)}</code>" if tag == "td" and index in table.names else _e(text)
    return f"<{tag}{css}>{content}</{tag}>"
