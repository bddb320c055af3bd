# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`make demo`: the demo server and client, both under `opentelemetry-instrument` with the
Prometheus exporter, then a summary of what their `/metrics` endpoints say.

    python -m examples.demo [--rounds 3] [--keep-running 0] [--out out/demo]

1. Starts `examples.demo_server` (streamable HTTP on 127.0.0.1) under
   `opentelemetry-instrument`, metrics on its own port, and waits until both ports listen.
2. Runs `examples.demo_client` the same way (another metrics port): every tool several
   times, a resource, a prompt and one budget scope that crosses its warning and critical
   levels. The client stays alive until its metrics have been read.
3. Scrapes both `/metrics`, prints a per-tool table for each side and a few key series,
   and stops both processes (bounded waits, SIGKILL as a last resort).
4. Both processes also run the mcp-tokens report exporter (`--metrics_exporter
   prometheus,mcp_tokens_report`), which writes a report of the run when a process exits
   (HTML, Markdown, JSON and text, in `--out`); the demo ends with their totals and where
   to look next.

Exit status 0 when every call succeeded and both processes exported mcp-tokens series.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import demo_content, metrics
from .demo_client import MARKER
from .processes import HOST, Child, free_port, prometheus_env, read_marked_line, report_env, start_module

STARTUP_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 90.0
METRICS_TIMEOUT_S = 30.0
CLIENT_LINGER_S = 120.0
REPORT_GRACE_S = 10.0
SERVER_SERVICE = "mcp-tokens-demo-server"
CLIENT_SERVICE = "mcp-tokens-demo-client"
# Each process writes its report at exit in every format the exporter has.
REPORT_FORMATS = (".html", ".md", ".json", ".txt")
DEFAULT_OUT = Path("out/demo")
REPORT_EXPORTERS = "prometheus,mcp_tokens_report"


@dataclass
class DemoRun:
    """What one run produced: the client's own report and both processes' /metrics text."""

    client_report: dict[str, Any]
    server_metrics: str
    client_metrics: str
    server_metrics_port: int
    client_metrics_port: int
    seconds: float
    # The report exporter's files, read once both processes exited: {side: {suffix: text}}.
    reports: dict[str, dict[str, str]] = field(default_factory=dict)
    report_dir: Path = DEFAULT_OUT

    def report_json(self, side: str) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(self.reports[side][".json"])
        return document


def report_paths(report_dir: Path, side: str) -> list[Path]:
    return [report_dir / f"{side}-report{suffix}" for suffix in REPORT_FORMATS]


def demo_env(service: str, metrics_port: int, report_dir: Path, side: str) -> dict[str, str]:
    """Prometheus on `metrics_port` and the report exporter; its terminal copy goes to the log."""
    return {
        **prometheus_env(service, metrics_port),
        "OTEL_METRICS_EXPORTER": REPORT_EXPORTERS,
        **report_env(report_paths(report_dir.resolve(), side)),
    }


def read_reports(report_dir: Path) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for side in ("server", "client"):
        for path in report_paths(report_dir, side):
            if path.exists():
                found.setdefault(side, {})[path.suffix] = path.read_text(encoding="utf-8")
    return found


def run(
    log_dir: Path, rounds: int = 3, keep_running_s: float = 0.0, report_dir: Path | None = None
) -> DemoRun:
    """Run both processes; their logs go to `log_dir`, their reports to `report_dir` (by
    default `log_dir` too)."""
    started = time.monotonic()
    report_dir = log_dir if report_dir is None else report_dir
    report_dir.mkdir(parents=True, exist_ok=True)
    for stale in (*report_paths(report_dir, "server"), *report_paths(report_dir, "client")):
        stale.unlink(missing_ok=True)
    mcp_port, server_metrics_port, client_metrics_port = free_port(), free_port(), free_port()
    server = start_module(
        "demo-server",
        "examples.demo_server",
        ["--port", str(mcp_port)],
        demo_env(SERVER_SERVICE, server_metrics_port, report_dir, "server"),
        log_dir,
        ports=(mcp_port, server_metrics_port),
    )
    client: Child | None = None
    try:
        server.wait_ready(STARTUP_TIMEOUT_S)
        client = start_module(
            "demo-client",
            "examples.demo_client",
            [
                "--url",
                f"http://{HOST}:{mcp_port}/mcp",
                "--rounds",
                str(rounds),
                "--linger",
                str(CLIENT_LINGER_S),
            ],
            demo_env(CLIENT_SERVICE, client_metrics_port, report_dir, "client"),
            log_dir,
            stdout_pipe=True,
        )
        report = json.loads(read_marked_line(client, MARKER, CLIENT_TIMEOUT_S))
        calls = sum(int(n) for n in report["calls"].values())
        # Both sides count on a background worker: wait (bounded) until every call is in.
        metrics.wait_for_calls(client_metrics_port, calls, METRICS_TIMEOUT_S)
        metrics.wait_for_calls(server_metrics_port, calls, METRICS_TIMEOUT_S)
        if keep_running_s > 0:
            print(
                f"Serving /metrics at http://{HOST}:{server_metrics_port}/metrics (server) and "
                f"http://{HOST}:{client_metrics_port}/metrics (client) for {keep_running_s:.0f} s",
                flush=True,
            )
            time.sleep(keep_running_s)
        result = DemoRun(
            client_report=report,
            server_metrics=metrics.scrape(server_metrics_port),
            client_metrics=metrics.scrape(client_metrics_port),
            server_metrics_port=server_metrics_port,
            client_metrics_port=client_metrics_port,
            seconds=time.monotonic() - started,
        )
    finally:
        # Both exit through their exit hooks, so the report exporter writes its report: the
        # client once its stdin closes, the server on SIGINT.
        if client is not None:
            client.stop(grace_s=REPORT_GRACE_S)
        server.stop(interrupt=True)
    result.reports = read_reports(report_dir)
    result.report_dir = report_dir
    return result


# --- printing --------------------------------------------------------------------------------
def _number(value: float) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "+Inf"
    return f"{value:,.0f}"


def _counts(counts: dict[str, float]) -> str:
    return " ".join(f"{key}:{_number(value)}" for key, value in sorted(counts.items())) or "-"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def side_table(samples: list[metrics.Sample], side: str) -> str:
    shows = {tool.name: tool.kind for tool in demo_content.TOOLS}
    header = (
        "operation",
        "target",
        "shows",
        "calls",
        "tokens/call",
        "p50~",
        "max<=",
        "risk",
        "overhead",
        "padding",
    )
    rows = [
        (
            summary.method,
            summary.target or "-",
            shows.get(summary.target, ""),
            str(summary.calls),
            _number(summary.mean),
            _number(summary.p50),
            _number(summary.max_bound),
            _counts(summary.risk),
            _counts(summary.overhead),
            _counts(summary.padding),
        )
        for summary in metrics.summarise(samples, side)
    ]
    return _table(header, rows)


def side_totals(samples: list[metrics.Sample], side: str) -> str:
    def total(name: str, **labels: str) -> str:
        return _number(metrics.total(samples, name, mcp_tokens_side=side, **labels))

    duration = f"mcp_{side}_operation_duration_seconds_count"
    crossings = "mcp_tokens_budget_crossings_total"
    definitions = "mcp_tokens_tool_definition"
    return "\n".join(
        [
            f"  response tokens: {total('mcp_tokens_payload_sum', mcp_tokens_direction='response')}"
            f"   request tokens: {total('mcp_tokens_payload_sum', mcp_tokens_direction='request')}",
            f"  tool-definition tax (sum of mcp_tokens_tool_definition): {total(definitions)}",
            f"  budget crossings: warning {total(crossings, mcp_tokens_budget_level='warning')}"
            f", critical {total(crossings, mcp_tokens_budget_level='critical')}"
            f"   budget utilisation observations: {total('mcp_tokens_budget_utilization_count')}",
            f"  operations timed ({duration}): {_number(metrics.total(samples, duration))}"
            f"   analysis skipped: {total('mcp_tokens_analysis_skipped_total')}",
        ]
    )


def render(result: DemoRun) -> str:
    out = [
        "tokens/call = _sum/_count of mcp_tokens_payload (exact); p50~ = histogram_quantile over its",
        "buckets; max<= = the smallest bucket bound holding every response; overhead, padding: totals.",
        "",
    ]
    for side, text, port in (
        ("server", result.server_metrics, result.server_metrics_port),
        ("client", result.client_metrics, result.client_metrics_port),
    ):
        samples = metrics.parse(text)
        out += [
            f"== {side} side (scraped http://{HOST}:{port}/metrics) ==",
            side_table(samples, side),
            side_totals(samples, side),
            "",
        ]
    out += [
        "== key series, client /metrics (the largest of each family; otel_scope_* labels left out) ==",
        *metrics.key_series(result.client_metrics),
        "",
    ]
    out += report_section(result)
    out += next_steps(result)
    calls = sum(int(n) for n in result.client_report["calls"].values())
    errors = result.client_report["errors"]
    out.append(f"Demo finished in {result.seconds:.1f} s: {calls} tool calls, client errors: {errors}")
    return "\n".join(out)


def report_section(result: DemoRun) -> list[str]:
    """The totals line of the report each process wrote at its exit."""
    out = [f"== reports written at exit (--metrics_exporter {REPORT_EXPORTERS}) =="]
    for side in ("client", "server"):
        text = result.reports.get(side, {}).get(".txt", "")
        totals = [line for line in text.splitlines() if line.startswith(f"{side}: ")]
        out += totals or [f"{side}: no report (see its log)"]
    return [*out, ""]


def next_steps(result: DemoRun) -> list[str]:
    reports = result.report_dir
    return [
        "== where to look next ==",
        f"  reports    {reports / 'client-report.html'} (open it in a browser), and .md, .json, .txt;",
        f"             {reports / 'server-report.html'} and the same for the server",
        "  dashboards dashboards/grafana/*.json: Grafana > Dashboards > New > Import, pick a Prometheus",
        "  alerts     dashboards/prometheus/alerts.yaml and rules.yaml (rule_files), dashboards/runbook.md",
        "  live       python -m examples.demo --keep-running 600 keeps both /metrics endpoints up: point a",
        "             Prometheus at them, or watch one with `mcp-tokens top http://127.0.0.1:PORT/metrics`",
        "",
    ]


def has_token_series(text: str) -> bool:
    return any(s.name.startswith("mcp_tokens_payload") for s in metrics.parse(text))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the mcp-tokens demo and summarise its metrics.")
    parser.add_argument("--rounds", type=int, default=3, help="times the client calls every tool (1-20)")
    parser.add_argument(
        "--keep-running",
        type=float,
        default=0.0,
        metavar="S",
        help="keep both /metrics up for S seconds (0-3600)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=DEFAULT_OUT,
        metavar="DIR",
        help=f"where both processes write their reports (default {DEFAULT_OUT})",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.rounds <= 20 or not 0 <= args.keep_running <= 3600:
        parser.error("--rounds must be in 1..20 and --keep-running in 0..3600")
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-demo-") as tmp:
        try:
            result = run(Path(tmp), args.rounds, args.keep_running, args.out)
        except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
            print(f"demo failed: {exc}", file=sys.stderr)
            for log in sorted(Path(tmp).glob("*.log")):
                print(f"--- {log.name} ---\n{log.read_text(errors='replace')[-4000:]}", file=sys.stderr)
            return 1
    print(render(result))
    missing = [
        side
        for side, text in (("server", result.server_metrics), ("client", result.client_metrics))
        if not has_token_series(text)
    ]
    if missing:
        print(
            f"no mcp_tokens_* series from the {' and '.join(missing)}: is mcp-tokens instrumenting MCP?",
            file=sys.stderr,
        )
        return 1
    return 1 if result.client_report["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
