# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report as rich tables: on the terminal (stderr, never a stdio server's stdout) and as
plain text (`.txt` files). Peer-supplied names are shown inert: no rich markup is parsed and
control characters are printed as escapes."""

from __future__ import annotations

import io
import os
import sys
from typing import IO

from opentelemetry.exporter.mcp_tokens.textformat import printable
from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from . import layout
from .model import Report

DEFAULT_WIDTH = 160
MAX_NAME_WIDTH = 32
MAX_PAGE_WIDTH = 400


def render_terminal(report: Report, max_rows: int, stream: IO[str] | None = None) -> None:
    """Write to `stream` (default: stderr): coloured on a terminal, plain text otherwise."""
    target = sys.stderr if stream is None else stream
    if target is None:  # no stderr (pythonw, a daemon): never fall back to stdout
        return
    console = Console(file=target, highlight=False, emoji=False, stderr=stream is None)
    if not console.is_terminal:
        target.write(render_text(report, max_rows, _width()))
        target.flush()
        return
    _print(report, max_rows, console)


def render_text(report: Report, max_rows: int, width: int = DEFAULT_WIDTH) -> str:
    """Plain text, no colour, no trailing spaces."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, emoji=False, color_system=None)
    _print(report, max_rows, console)
    return "".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines())


def _width() -> int:
    try:
        return max(60, min(400, int(os.environ.get("COLUMNS", ""))))
    except ValueError:
        return DEFAULT_WIDTH


def _print(report: Report, max_rows: int, console: Console) -> None:
    lines = layout.headline(report)
    console.print(_text(lines[0], "bold"))
    for line in lines[1:]:
        console.print(_text(line, "dim"))
    tables = [(table, _table(table) if table.rows else None) for table in layout.tables(report, max_rows)]
    # A page narrower than a table makes rich squeeze it, and its squeezing crops headers and
    # drops last columns: print tables at their natural width instead (up to MAX_PAGE_WIDTH;
    # a narrower terminal wraps the long lines, nothing is lost).
    console.width = max([console.width, *(_natural_width(console, t) for _, t in tables if t is not None)])
    for table, rendered in tables:
        console.print()
        console.print(_text(table.title, "bold"))
        if rendered is None:
            console.print(_text("  " + table.empty, "dim"))
            continue
        console.print(rendered)
        if table.omitted:
            console.print(_text(f"  +{table.omitted:,} more rows in the JSON report", "dim"))
    console.print()
    console.print(_text(layout.ESTIMATE_NOTE, "dim"))
    verdict = layout.verdict_lines(report)
    if verdict:
        style = "bold green" if report.verdict.passed else "bold red"
        console.print(Text(printable(verdict[0]), style=style))
        for line in verdict[1:]:
            console.print(_text("  " + line))


def _table(table: layout.Table) -> Table:
    rendered = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    for index, header in enumerate(table.headers):
        # Headers and numbers are never cut (rich crops a header that does not fit) and names
        # keep their width (up to a point), so that lists of findings wrap first.
        longest = max((len(row[index]) for row in table.rows), default=0)
        if index in table.numeric:
            min_width = max(longest, len(header))
        elif index in table.names:
            min_width = max(min(MAX_NAME_WIDTH, longest), len(header))
        else:
            min_width = len(header)
        rendered.add_column(
            header,
            justify="right" if index in table.numeric else "left",
            overflow="fold",
            min_width=min_width,
        )
    for row in table.rows:
        rendered.add_row(*(_text(cell) for cell in row))
    return rendered


def _natural_width(console: Console, rendered: Table) -> int:
    return int(Measurement.get(console, console.options.update(width=MAX_PAGE_WIDTH), rendered).maximum)


def _text(text: str, style: str = "") -> Text:
    return Text(printable(text), style=style)
