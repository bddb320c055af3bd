# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens top URL`: a live table of an instrumented process's token economics.

Scrapes a Prometheus `/metrics` endpoint (e.g. `opentelemetry-instrument --metrics_exporter
prometheus`) every `--interval` seconds and shows, per side, server and tool, tokens per
second (the rate of `mcp_tokens_payload_sum` between two scrapes), calls, tokens, max, risk tiers,
overhead, padding and budget utilisation, then the tools never called, the responses over a
host's result cap (`--host-cap`) and, with a price, the cost, until Ctrl-C (exit 0). `--once` prints one
snapshot (totals, no rates) for scripts.

The endpoint is untrusted: only http(s), at most `--max-bytes` read per scrape, redirects
only to http(s), at most `--rows` rows shown, every name printed inert.
"""

from __future__ import annotations

import base64
import math
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.exporter.mcp_tokens.report import layout
from opentelemetry.exporter.mcp_tokens.report.economics import server_costs
from opentelemetry.exporter.mcp_tokens.report.model import Report, build_report
from opentelemetry.exporter.mcp_tokens.report.prometheus import snapshot_from_text
from opentelemetry.exporter.mcp_tokens.report.rows import OperationRow
from opentelemetry.exporter.mcp_tokens.textformat import number, percent, printable
from rich import box
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from .connect import Target
from .errors import CliError, ExitCode
from .options import TopOptions
from .render import plain_when_piped, terminal_console


@dataclass
class Frame:
    """One scrape, and the rates since the one before (tokens/s, calls/s per row)."""

    report: Report
    at: float
    series: int
    rates: dict[tuple[str, str, str, str], tuple[float, float]] = field(default_factory=dict)
    error: str = ""


def run_top(options: TopOptions) -> int:
    describe = Target(url=options.url).describe()
    frame = take_frame(options, None)  # a first failure is the command's error
    if options.once:
        _print_once(frame, options, describe)
        return int(ExitCode.OK)
    return _live(frame, options, describe)


def _live(frame: Frame, options: TopOptions, describe: str) -> int:
    console = Console(highlight=False, emoji=False)
    try:
        with Live(view(frame, options, describe), console=console, auto_refresh=False) as live:
            while True:
                time.sleep(options.interval_s)
                try:
                    frame = take_frame(options, frame)
                except CliError as error:  # keep showing the last good scrape
                    frame.error = error.message
                live.update(view(frame, options, describe), refresh=True)
    except KeyboardInterrupt:
        return int(ExitCode.OK)


def take_frame(options: TopOptions, previous: Frame | None) -> Frame:
    text = scrape(options.url, options.timeout_s, options.max_bytes)
    try:
        snapshot = snapshot_from_text(text)
    except Exception as error:  # the parser's errors on hostile text are not all ValueError
        raise CliError(
            ExitCode.METRICS_MALFORMED,
            f"{Target(url=options.url).describe()}: not Prometheus text ({type(error).__name__}: {error})",
        ) from None
    report = build_report(
        snapshot, price=options.price, host_cap_tokens=options.host_cap or None, hosts=options.hosts
    )
    frame = Frame(report, time.monotonic(), len(snapshot.series))
    if previous is not None:
        frame.rates = _rates(previous, frame)
    return frame


def _rates(previous: Frame, current: Frame) -> dict[tuple[str, str, str, str], tuple[float, float]]:
    elapsed = current.at - previous.at
    if elapsed <= 0:
        return {}
    before = {row.key: row for row in previous.report.rows}
    rates = {}
    for row in current.report.rows:
        old = before.get(row.key)
        tokens = row.response_tokens - (old.response_tokens if old else 0.0)
        calls = row.calls - (old.calls if old else 0)
        if tokens < 0 or calls < 0:  # the process restarted: its counters began again
            tokens, calls = row.response_tokens, row.calls
        rates[row.key] = (tokens / elapsed, calls / elapsed)
    return rates


# --- scraping -----------------------------------------------------------------------------------
class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(  # noqa: PLR0917 (the base class's signature)
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        if urlsplit(newurl).scheme not in ("http", "https"):
            raise urllib.error.URLError(f"redirect to a non-HTTP URL refused: {newurl[:200]}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def scrape(url: str, timeout_s: float, max_bytes: int) -> str:
    describe = Target(url=url).describe()
    request_url, headers = _request(url)
    opener = urllib.request.build_opener(_HttpOnlyRedirects())
    try:
        with opener.open(urllib.request.Request(request_url, headers=headers), timeout=timeout_s) as answer:
            body = _read_bounded(answer, max_bytes + 1, time.monotonic() + timeout_s)
    except urllib.error.HTTPError as error:
        message = f"{describe}: HTTP {error.code} {error.reason}"
        raise CliError(ExitCode.METRICS_UNREACHABLE, message) from None
    except TimeoutError:
        message = f"{describe}: no complete answer within --timeout"
        raise CliError(ExitCode.METRICS_UNREACHABLE, message) from None
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise CliError(ExitCode.METRICS_UNREACHABLE, f"{describe}: unreachable ({reason})") from None
    if len(body) > max_bytes:
        raise CliError(ExitCode.METRICS_MALFORMED, f"{describe}: more than {max_bytes:,} bytes (--max-bytes)")
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(ExitCode.METRICS_MALFORMED, f"{describe}: not UTF-8 text") from None


def _read_bounded(answer: Any, limit: int, deadline: float) -> bytes:
    """At most `limit` bytes, all before `deadline`: an endpoint that trickles is cut off."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        if time.monotonic() > deadline:
            raise TimeoutError
        chunk = answer.read(min(65536, limit - size))
        if not chunk:
            break
        chunks.append(bytes(chunk))
        size += len(chunk)
    return b"".join(chunks)


def _request(url: str) -> tuple[str, dict[str, str]]:
    """The URL without credentials, and their Basic authorization header if it had any."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CliError(ExitCode.USAGE, f"expected an http(s) URL of a /metrics endpoint, got {url!r}")
    headers = {"Accept": "text/plain;version=0.0.4"}
    if parts.username is None and parts.password is None:
        return url, headers
    secret = f"{parts.username or ''}:{parts.password or ''}".encode()
    headers["Authorization"] = "Basic " + base64.b64encode(secret).decode("ascii")
    netloc = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc)), headers


# --- view ---------------------------------------------------------------------------------------
_HEADERS = (
    "Side",
    "Server",
    "Operation",
    "Tool / prompt",
    "Tokens/s",
    "Calls",
    "Tokens",
    "Max",
    "Risk",
    "Overhead",
    "Padding",
)


_NO_WRAP = frozenset({0, 2, 4, 5, 6, 7, 8, 9})


def ordered_rows(frame: Frame) -> list[OperationRow]:
    """Busiest first: tokens per second, then total tokens."""

    def busy(row: OperationRow) -> tuple[float, float, tuple[str, str, str, str]]:
        return (-frame.rates.get(row.key, (0.0, 0.0))[0], -row.response_tokens, row.key)

    return sorted((row for row in frame.report.rows if row.calls), key=busy)


def view(frame: Frame, options: TopOptions, describe: str) -> Group:
    parts: list[Any] = [Text(printable(_title(frame, options, describe)), style="bold")]
    if frame.error:
        parts.append(Text(printable(f"last scrape failed: {frame.error} (showing the one before)"), "red"))
    rows = ordered_rows(frame)
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", pad_edge=False)
    cells = [_cells(frame, row) for row in rows[: options.rows]]
    headers: tuple[str, ...] = _HEADERS
    if options.price is not None:
        headers = (*_HEADERS, "Cost")
        cells = [
            (*cell, options.price.text(row.response_tokens)) for cell, row in zip(cells, rows, strict=False)
        ]
    for index, header in enumerate(headers):
        # Numbers and short words never wrap; names keep up to 24 columns; findings wrap first.
        longest = max((len(row[index]) for row in cells), default=0)
        table.add_column(
            header,
            justify="right" if 4 <= index <= 7 or index == len(_HEADERS) else "left",
            overflow="fold",
            no_wrap=index in _NO_WRAP or index == len(_HEADERS),
            min_width=min(24, longest) if index in (1, 3) else longest if index == len(_HEADERS) else None,
        )
    for row in cells:
        table.add_row(*(Text(printable(cell)) for cell in row))
    parts.append(table if rows else Text("no mcp-tokens responses yet at this endpoint", style="dim"))
    if len(rows) > options.rows:
        parts.append(Text(f"+{len(rows) - options.rows:,} more rows (--rows)", style="dim"))
    parts += [Text(printable(line), style="dim") for line in _budget_lines(frame.report, options.rows)]
    parts += [Text(printable(line), style="dim") for line in economy_lines(frame.report, options.rows)]
    return Group(*parts)


def _title(frame: Frame, options: TopOptions, describe: str) -> str:
    clock = datetime.now().strftime("%H:%M:%S")
    every = "once" if options.once else f"every {options.interval_s:g} s, Ctrl-C to stop"
    return f"mcp-tokens top · {describe} · {clock} · {every} · {frame.series:,} series"


def _cells(frame: Frame, row: OperationRow) -> tuple[str, ...]:
    rate = frame.rates.get(row.key)
    return (
        row.side,
        row.server or "?",
        row.method,
        row.target or "-",
        _rate(rate[0]) if rate else "—",
        f"{row.calls:,}",
        number(row.response_tokens),
        layout.max_cell(row),
        layout.risk_cell(row),
        f"{row.overhead_ratio:.1%}" if row.overhead_tokens else "—",
        layout.padding_cell(row),
    )


def _rate(value: float) -> str:
    return "—" if not math.isfinite(value) else f"{value:,.1f}"


def _budget_lines(report: Report, limit: int) -> list[str]:
    lines = []
    for budget in report.budgets[:limit]:
        crossings = ", ".join(
            f"{level} {count:,}" for (side, level), count in report.crossings.items() if side == budget.side
        )
        lines.append(
            f"budget {budget.side} {budget.server or '?'}: {budget.observations:,} observations, "
            f"peak ≤{percent(budget.peak)}, p95≈{percent(budget.p95)}, "
            f"mean {percent(budget.mean)}"
            f"; scopes crossing: {crossings or 'none'}"
        )
    return lines


def economy_lines(report: Report, limit: int) -> list[str]:
    """Per side and server: the tools listed but never called; the responses over the host cap;
    with a price, what the traffic costs."""
    lines = [f"{layout.unused_title(u.side, u.server)}: {u.summary()}" for u in report.unused[:limit]]
    if report.host_cap is not None and report.rows:
        lines.append(f"{layout.HOST_CAP_TITLE}: {report.host_cap.summary()}")
    if report.hosts is not None:
        lines.extend(f"{layout.HOSTS_TITLE}: {line}" for line in report.hosts.summary())
    price = report.price
    if price is None:
        return lines
    for cost in server_costs(report.rows, report.unused)[:limit]:
        lines.append(
            f"cost {cost.side} {cost.server or '?'} at {price.per_mtok:g} {price.currency} per million input "
            f"tokens: responses {price.text(cost.response_tokens)} · definitions "
            f"{price.text(cost.definition_tokens)} per conversation, "
            f"{price.text(cost.never_called_tokens)} of it never called"
        )
    return lines


def _print_once(frame: Frame, options: TopOptions, describe: str) -> None:
    with plain_when_piped(terminal_console(sys.stdout), sys.stdout) as target:
        target.print(view(frame, options, describe))
