# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Writing a finished report: to the terminal (stderr) and to files, each failure logged and
swallowed so that a full disk or a bad path never reaches the host process."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from .model import Report
from .render_html import render_html
from .render_json import render_json
from .render_markdown import render_markdown
from .settings import ReportFile, ReportSettings

_logger = logging.getLogger(__name__)


def render(report: Report, report_format: str, max_rows: int) -> str:
    if report_format == "json":
        return render_json(report)
    if report_format == "markdown":
        return render_markdown(report, max_rows)
    if report_format == "html":
        return render_html(report, max_rows)
    from . import render_terminal  # noqa: PLC0415 -- rich loads at exit, see _terminal

    return render_terminal.render_text(report, max_rows)


def write_report(report: Report, settings: ReportSettings) -> list[Path]:
    """Write every configured output; return the files written."""
    written = []
    for file in settings.files:
        try:
            write_atomically(file.path, render(report, file.format, settings.max_rows))
            written.append(file.path)
        except Exception as error:
            _logger.warning("mcp-tokens report: could not write %s: %s", file.path, error)
    if settings.terminal:
        try:
            _terminal(report, settings.max_rows)
        except Exception as error:
            _logger.warning("mcp-tokens report: could not print the report: %s", error)
    return written


def _terminal(report: Report, max_rows: int) -> None:
    # rich (the terminal tables) loads when the report is written, at exit: it adds nothing to
    # the start-up of the application the exporter runs in.
    from . import render_terminal  # noqa: PLC0415

    render_terminal.render_terminal(report, max_rows)


def write_atomically(path: Path, text: str) -> None:
    """A reader (a CI step, a process writing the same path) never sees half a report."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


__all__ = ["ReportFile", "render", "write_atomically", "write_report"]
