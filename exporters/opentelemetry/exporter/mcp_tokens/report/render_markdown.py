"""The report as GitHub-flavoured Markdown (a CI artifact or a PR comment). Peer-supplied
names are code spans and every other cell is escaped, with the CLI's own helpers."""

from __future__ import annotations

from opentelemetry.exporter.mcp_tokens.cli.render_markdown import _code, _escape

from . import layout
from .model import Report


def render_markdown(report: Report, max_rows: int) -> str:
    lines = layout.headline(report)
    out = [f"## {_escape(lines[0])}", ""]
    out += [f"- {_escape(line)}" for line in lines[1:]]
    for table in layout.tables(report, max_rows):
        out += ["", f"### {_escape(table.title)}", ""]
        if not table.rows:
            out.append(_escape(table.empty))
            continue
        out.append("| " + " | ".join(_escape(h) for h in table.headers) + " |")
        out.append(
            "|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.headers))) + "|"
        )
        for row in table.rows:
            cells = (_code(c) if i in table.names else _escape(c) for i, c in enumerate(row))
            out.append("| " + " | ".join(cells) + " |")
        if table.omitted:
            out += ["", f"+{table.omitted:,} more rows in the JSON report."]
    out += ["", f"<sub>{_escape(layout.ESTIMATE_NOTE)}</sub>"]
    verdict = layout.verdict_lines(report)
    if verdict:
        out += ["", f"**{_escape(verdict[0])}**", ""]
        out += [f"- {_escape(line)}" for line in verdict[1:]]
    return "\n".join(out) + "\n"
