# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Output: a rich terminal table (default), `--format markdown` or `--format json`; progress on stderr.

The terminal view degrades by itself: no colour when stdout is not a terminal (or with
NO_COLOR), the width of the terminal or of `COLUMNS`.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from enum import Enum
from typing import IO, Any

from opentelemetry.exporter.mcp_tokens.textformat import printable, window_share
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier
from rich import box
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner as RichSpinner
from rich.table import Table
from rich.text import Text

from . import render_json, render_markdown, texts
from .diff import ChangeClass, DiffResult
from .hosts import host_lines
from .profile import ServerProfile
from .rules import Severity
from .static import Bound


class OutputFormat(str, Enum):
    TABLE = "table"
    MARKDOWN = "markdown"
    JSON = "json"


_RISK_STYLES = {
    RiskTier.LOW: "green",
    RiskTier.MEDIUM: "yellow",
    RiskTier.HIGH: "bold dark_orange",
    RiskTier.CRITICAL: "bold red",
}
_BOUND_STYLES = {Bound.BOUNDED: "green", Bound.UNBOUNDED: "bold red", Bound.UNKNOWN: "dim"}
_SEVERITY_STYLES = {Severity.INFO: "cyan", Severity.WARNING: "yellow", Severity.ERROR: "bold red"}
_CLASS_STYLES = {
    ChangeClass.BREAKING: "bold red",
    ChangeClass.RISKY: "bold dark_orange",
    ChangeClass.SAFE: "green",
    ChangeClass.INFO: "dim",
}


def render_profile(profile: ServerProfile, output: OutputFormat, stream: IO[str]) -> None:
    if output is OutputFormat.JSON:
        stream.write(render_json.dumps(render_json.profile_document(profile)))
        return
    if output is OutputFormat.MARKDOWN:
        stream.write(render_markdown.profile_markdown(profile))
        return
    with plain_when_piped(terminal_console(stream), stream) as target:
        _profile_table(profile, target)


def render_diff(result: DiffResult, output: OutputFormat, stream: IO[str]) -> None:
    if output is OutputFormat.JSON:
        stream.write(render_json.dumps(render_json.diff_document(result)))
        return
    if output is OutputFormat.MARKDOWN:
        stream.write(render_markdown.diff_markdown(result))
        return
    with plain_when_piped(terminal_console(stream), stream) as target:
        _diff_table(result, target)


def terminal_console(stream: IO[str]) -> Console:
    """A console on `stream` that prints peer-supplied text as it is (no highlighting, no emoji)."""
    return Console(file=stream, highlight=False, emoji=False)


@contextlib.contextmanager
def plain_when_piped(console: Console, stream: IO[str]) -> Iterator[Console]:
    """Print to a terminal as is; into a pipe or file, record and drop the padding rich leaves
    at line ends, so saved output (and the committed snapshots) has no trailing spaces."""
    if console.is_terminal:
        yield console
        return
    buffer = io.StringIO()
    recorder = Console(file=buffer, width=console.width, highlight=False, emoji=False, color_system=None)
    yield recorder
    stream.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))


def _profile_table(profile: ServerProfile, console: Console) -> None:
    console.print(_text(f"mcp-tokens profile: {texts.server_title(profile)}", "bold"))
    console.print(_text(texts.connection(profile), "dim"))
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    table.add_column("Tool", overflow="fold")
    for header in ("Definition", "Window", "Worst case"):
        table.add_column(header, justify="right")
    for header in ("Bound", "Risk", "Advice"):
        table.add_column(header)
    window = profile.settings.context_window
    for tool in profile.tools:
        table.add_row(
            _text(tool.name),
            f"{tool.definition.tokens:,}",
            window_share(tool.definition.tokens / window),
            texts.worst_case(tool),
            Text(tool.output.bound.value, style=_BOUND_STYLES[tool.output.bound]),
            Text(texts.risk(tool.risk), style=_RISK_STYLES.get(tool.risk, "dim") if tool.risk else "dim"),
            _advice_counts(tool.recommendations),
        )
    console.print()
    console.print(table)
    console.print()
    console.print(Text(texts.tax_summary(profile), style="bold"))
    console.print(Text(texts.risk_summary(profile), style="bold"))
    _output_fields(profile, console)
    _calls(profile, console)
    _hosts(profile, console)
    _recommendations(profile, console)


def _hosts(profile: ServerProfile, console: Console) -> None:
    if not profile.hosts:
        return
    console.print()
    console.print(Text("Hosts", style="bold"))
    for check, line in zip(profile.hosts, host_lines(profile.hosts), strict=True):
        console.print(_text(f"  {line}", "red" if check.exceeded else ""))


def _advice_counts(recommendations: tuple[Any, ...]) -> Text:
    text = Text()
    for severity in (Severity.ERROR, Severity.WARNING, Severity.INFO):
        count = sum(1 for r in recommendations if r.severity is severity)
        if count:
            if text:
                text.append(" ")
            text.append(f"{count} {severity.value}", style=_SEVERITY_STYLES[severity])
    return text


def _output_fields(profile: ServerProfile, console: Console) -> None:
    rows = [tool for tool in profile.tools if tool.output.bound is not Bound.UNKNOWN and tool.output.fields]
    if not rows:
        return
    console.print()
    console.print(Text("Worst-case tokens per output field", style="bold"))
    for tool in rows:
        console.print(Text.assemble(_text("  " + tool.name, "bold"), ": ", _text(texts.output_fields(tool))))


def _calls(profile: ServerProfile, console: Console) -> None:
    for tool in profile.tools:
        if tool.call is None:
            continue
        console.print()
        console.print(_text(f"Measured call: {tool.name}", "bold"))
        for line in texts.call_lines(tool.call):
            console.print(_text("  " + line))


def _recommendations(profile: ServerProfile, console: Console) -> None:
    recommendations = profile.grouped_recommendations()
    console.print()
    if not recommendations:
        console.print("No recommendations.")
        return
    console.print(Text("Recommendations", style="bold"))
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column(max_width=28, overflow="fold")
    grid.add_column(overflow="fold")
    for r, tools in recommendations:
        grid.add_row(
            Text("  " + r.severity.value, style=_SEVERITY_STYLES[r.severity]),
            _text(_tool_list(tools), "bold"),
            _text(r.message),
        )
    console.print(grid)


def _tool_list(tools: list[str], shown: int = 3) -> str:
    """The tools one piece of advice applies to; the table above names them all."""
    if not tools:
        return "(server)"
    more = f" +{len(tools) - shown} more" if len(tools) > shown else ""
    return ", ".join(tools[:shown]) + more


def _diff_table(result: DiffResult, console: Console) -> None:
    worst = result.worst
    console.print(
        Text.assemble(
            ("mcp-tokens diff: ", "bold"),
            (worst.value.upper() if worst else "NO CHANGES", _CLASS_STYLES[worst] if worst else "green"),
        )
    )
    old, new = result.old, result.new
    console.print(_text(texts.diff_sides(old.source, new.source), "dim"))
    totals = texts.diff_totals(old.definition_tokens, new.definition_tokens, len(old.tools), len(new.tools))
    console.print(Text(totals, style="dim"))
    if not result.changes:
        console.print("No changes.")
        return
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    table.add_column("Class")
    table.add_column("Tool")
    table.add_column("Change", overflow="fold")
    for change in result.changes:
        style = _CLASS_STYLES[change.change_class]
        table.add_row(
            Text(change.change_class.value.upper(), style=style),
            _text(change.tool or "(server)"),
            _text(change.message),
        )
    console.print()
    console.print(table)


def _text(text: str, style: str = "") -> Text:
    """A rich Text of untrusted text: no markup parsing, control characters shown, not sent."""
    return Text(printable(text), style=style)


class Spinner:
    """Progress while connecting and listing: a spinner on stderr when it is a terminal, else nothing.

    Each update is drawn at once (not at the next animation frame), so every phase shows, however fast.
    """

    def __init__(self, enabled: bool) -> None:
        self._live: Any = None
        self._spinner: Any = None
        if enabled and sys.stderr.isatty():
            self._spinner = RichSpinner("dots", text="Starting…", style="green")
            self._live = Live(
                self._spinner, console=Console(stderr=True), refresh_per_second=12.5, transient=True
            )

    def __enter__(self) -> Spinner:
        if self._live is not None:
            self._live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._live is not None:
            self._live.stop()

    def update(self, message: str) -> None:
        if self._live is not None:
            self._spinner.update(text=message + "…")
            self._live.refresh()
