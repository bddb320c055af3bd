# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report as GitHub-flavoured Markdown (a CI artifact or a PR comment). Peer-supplied
names are code spans and every other cell is escaped, with the helpers the CLI uses too."""

from __future__ import annotations

from opentelemetry.exporter.mcp_tokens.textformat import markdown_code, markdown_text

from . import layout
from .model import Report


def render_markdown(report: Report, max_rows: int) -> str:
    lines = layout.headline(report)
    out = [f"## {markdown_text(lines[0])}", ""]
    out += [f"- {markdown_text(line)}" for line in lines[1:]]
    for table in layout.tables(report, max_rows):
        out += ["", f"### {markdown_text(table.title)}", ""]
        if not table.rows:
            out.append(markdown_text(table.empty))
            continue
        out.append("| " + " | ".join(markdown_text(h) for h in table.headers) + " |")
        out.append(
            "|" + "|".join("---:" if i in table.numeric else "---" for i in range(len(table.headers))) + "|"
        )
        for row in table.rows:
            cells = (markdown_code(c) if i in table.names else markdown_text(c) for i, c in enumerate(row))
            out.append("| " + " | ".join(cells) + " |")
        if table.omitted:
            out += ["", f"+{table.omitted:,} more rows in the JSON report."]
    out += ["", f"<sub>{markdown_text(layout.ESTIMATE_NOTE)}</sub>"]
    verdict = layout.verdict_lines(report)
    if verdict:
        out += ["", f"**{markdown_text(verdict[0])}**", ""]
        out += [f"- {markdown_text(line)}" for line in verdict[1:]]
    return "\n".join(out) + "\n"
