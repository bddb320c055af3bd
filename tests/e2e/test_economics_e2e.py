# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Tool economics end to end: a run whose calls this test chooses, read in the three places.

The demo server runs under `opentelemetry-instrument` with the Prometheus exporter and the
report exporter (price 3 per million input tokens). A client in this process lists its eight
tools and calls three of them, once with a result over the 25,000-token host cap. Then:

- a real Prometheus, loading the committed recording rules, answers the Tool economics
  dashboard's queries and the unused-tool rules with exactly the numbers the raw series give
  (listed, called, never called, their tokens and share, tokens per call, over the cap);
- `mcp-tokens top --once --price-per-mtok 3` prints the same sentence and costs;
- the report's JSON (written when the server stops) has the same numbers, and its HTML page,
  rendered by headless Chromium, draws charts that hold them.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings
from opentelemetry.exporter.mcp_tokens.dashboards.expressions import dashboard_expressions, substitute
from opentelemetry.exporter.mcp_tokens.dashboards.names import TOOL_DEFINITION

from examples import metrics
from examples.demo_client import connect
from examples.processes import HOST, Child, free_port, prometheus_env, report_env, start_module

from .conftest import RULES, require_sdk_configurator
from .expected import response_tokens
from .monitoring import Prometheus, find_binary, running_prometheus

pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_S = 30.0
DATA_TIMEOUT_S = 40.0
JOB = "econ-server"
SERVER = "mcp-tokens-demo"
PRICE = 3.0
HOST_CAP = 25_000
# Three of the demo's eight tools; export_audit_log once over the host cap (14 days: 28,503 tokens).
CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("customer_lookup", {"customer_id": 7}),
    ("search_orders", {"query": "late", "limit": 5}),
    ("search_orders", {"query": "overdue", "limit": 10}),
    ("export_audit_log", {"days": 10}),
    ("export_audit_log", {"days": 14}),
)
DASHBOARD = "grafana/mcp-tokens-economics.json"


@dataclass
class Run:
    prometheus: Prometheus
    definitions: dict[str, float]  # the raw gauge per tool, as the process exports it
    top: subprocess.CompletedProcess[str]
    workdir: Path
    server: Child


async def _client(url: str) -> list[str]:
    async with connect(url) as session:
        listed = await session.list_tools()
        for name, arguments in CALLS:
            await session.call_tool(name, arguments)
        assert session.errors == []
        return listed


def _raw_definitions(port: int) -> dict[str, float]:
    samples = metrics.parse(metrics.scrape(port))
    return {
        s.labels["gen_ai_tool_name"]: s.value
        for s in samples
        if s.name == TOOL_DEFINITION and s.labels.get("mcp_tokens_side") == "server" and s.value > 0
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    prometheus_bin = find_binary("prometheus")
    if prometheus_bin is None:
        pytest.skip("Debian's prometheus is not installed (.ci/run installs it)")
    require_sdk_configurator()
    workdir = tmp_path_factory.mktemp("economics-e2e")
    metrics_port, mcp_port = free_port(), free_port()
    env = {
        **prometheus_env("mcp-tokens-economics-server", metrics_port),
        "OTEL_METRICS_EXPORTER": "prometheus,mcp_tokens_report",
        **report_env([workdir / "server.json", workdir / "server.html"], price_per_mtok=str(PRICE)),
    }
    with running_prometheus(prometheus_bin, workdir / "prometheus", {JOB: [metrics_port]}, [RULES]) as prom:
        server = start_module(
            "economics-server",
            "examples.demo_server",
            ["--port", str(mcp_port)],
            env,
            workdir,
            ports=(mcp_port, metrics_port),
        )
        try:
            server.wait_ready(STARTUP_TIMEOUT_S)
            listed = asyncio.run(_client(f"http://{HOST}:{mcp_port}/mcp"))
            assert len(listed) == 8
            metrics.wait_for_calls(metrics_port, len(CALLS), DATA_TIMEOUT_S)
            definitions = _raw_definitions(metrics_port)
            top = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "opentelemetry.exporter.mcp_tokens.cli",
                    "top",
                    "--once",
                    "--price-per-mtok",
                    str(PRICE),
                    f"http://{HOST}:{metrics_port}/metrics",
                ],
                capture_output=True,
                text=True,
                timeout=30,
                env={"COLUMNS": "220", "PATH": "/usr/bin:/bin"},
                check=False,
            )
            yield Run(prom, definitions, top, workdir, server)
        finally:
            server.stop(interrupt=True)


def _called() -> dict[str, int]:
    found: dict[str, int] = {}
    for name, _ in CALLS:
        found[name] = found.get(name, 0) + 1
    return found


def _expected(run: Run) -> dict[str, Any]:
    called = _called()
    never = {tool: tokens for tool, tokens in run.definitions.items() if tool not in called}
    total = sum(run.definitions.values())
    return {
        "listed": len(run.definitions),
        "called": len(called),
        "never": never,
        "never_tokens": sum(never.values()),
        "total": total,
        "share": sum(never.values()) / total,
        "per_call": {tool: run.definitions[tool] / n for tool, n in called.items()},
    }


def _panel_queries(title: str) -> list[str]:
    found = [
        substitute(e.expr, {"job": JOB, "__range": "5m"})
        for e in dashboard_expressions(GeneratorSettings())
        if e.source.startswith(f"{DASHBOARD} panel") and f"{title!r}" in e.source
    ]
    assert found, title
    return found


def _by(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {item["metric"].get(label, ""): float(item["value"][1]) for item in result}


def _wait(run: Run, expr: str, label: str, want: dict[str, float]) -> dict[str, float]:
    result = run.prometheus.wait_until(expr, lambda r: _by(r, label) == want, DATA_TIMEOUT_S)
    return _by(result, label)


def test_the_run_lists_eight_tools_and_calls_three(run: Run) -> None:
    assert set(_called()) <= set(run.definitions)
    assert len(run.definitions) == 8


def test_prometheus_answers_the_dashboards_unused_tool_queries_exactly(run: Run) -> None:
    want = _expected(run)
    never = _panel_queries("Tools never called, by definition tokens")[0]
    assert _wait(run, never, "gen_ai_tool_name", want["never"]) == want["never"]
    listed, called, never_count = _panel_queries("Tools listed, called and never called")
    for expr, value in (
        (listed, want["listed"]),
        (called, want["called"]),
        (never_count, len(want["never"])),
    ):
        assert _wait(run, expr, "mcp_tokens_server_name", {SERVER: value}) == {SERVER: value}
    (share,) = _panel_queries("Never-called share of the definition tax")
    got = _wait(run, share, "mcp_tokens_server_name", {SERVER: want["share"]})
    assert got[SERVER] == pytest.approx(want["share"], rel=1e-12)
    (per_call,) = _panel_queries("Definition tokens per call")
    assert _wait(run, per_call, "gen_ai_tool_name", want["per_call"]) == want["per_call"]


def test_the_recording_rules_give_the_same_numbers(run: Run) -> None:
    want = _expected(run)
    matcher = f'{{job="{JOB}", mcp_tokens_side="server"}}'
    server_rules = {
        "job_mcp_tokens_side_mcp_tokens_server_name:mcp_tokens_tool_definition:listed_count": want["listed"],
        "job_mcp_tokens_side_mcp_tokens_server_name:mcp_tokens_tool_definition:called_count1d": want[
            "called"
        ],
        "job_mcp_tokens_side_mcp_tokens_server_name:mcp_tokens_tool_definition:never_called_sum1d": want[
            "never_tokens"
        ],
    }
    for record, value in server_rules.items():
        assert _wait(run, record + matcher, "mcp_tokens_server_name", {SERVER: value}) == {SERVER: value}
    per_tool = (
        "job_mcp_tokens_side_mcp_tokens_server_name_gen_ai_tool_name:"
        + "mcp_tokens_tool_definition:never_called1d"
    )
    assert _wait(run, per_tool + matcher, "gen_ai_tool_name", want["never"]) == want["never"]


def test_prometheus_counts_the_responses_over_the_host_cap_exactly(run: Run) -> None:
    over = {tool: 0 for tool, _ in CALLS}
    for tool, arguments in CALLS:
        over[tool] += response_tokens(tool, arguments) > HOST_CAP
    want = {tool: float(n) for tool, n in over.items()}
    assert want["export_audit_log"] == 1
    (expr,) = _panel_queries("Responses over the host cap")
    assert _wait(run, expr, "gen_ai_tool_name", want) == want


def test_definition_tax_per_conversation_costs_the_listing_at_the_price(run: Run) -> None:
    want = _expected(run)
    queries = _panel_queries("Definition tax per conversation (${currency})")
    expected = {"all": want["total"] * PRICE / 1e6, "never": want["never_tokens"] * PRICE / 1e6}
    for expr, key in zip(queries, ("all", "never"), strict=True):
        got = _wait(run, expr, "mcp_tokens_server_name", {SERVER: expected[key]})
        assert got[SERVER] == pytest.approx(expected[key], rel=1e-9)


def test_top_says_the_same(run: Run) -> None:
    assert run.top.returncode == 0, run.top.stderr
    want = _expected(run)
    text = " ".join(run.top.stdout.split())
    never, listed = len(want["never"]), want["listed"]
    sentence = (
        f"Tools listed but never called (server, {SERVER}): {never} of {listed}, "
        f"{want['never_tokens']:,.0f} of {want['total']:,.0f} definition tokens ({want['share']:.0%})"
    )
    assert sentence in text
    assert f"cost server {SERVER} at 3 USD per million input tokens" in text
    assert f"Responses hosts would refuse: {_over_cap_sentence()}" in text


def _over_cap() -> dict[str, tuple[int, int, int]]:
    """(responses over the cap, calls, largest response) per tool the run called over it."""
    found: dict[str, tuple[int, int, int]] = {}
    for tool, arguments in CALLS:
        over, calls, largest = found.get(tool, (0, 0, 0))
        tokens = response_tokens(tool, arguments)
        found[tool] = (over + (tokens > HOST_CAP), calls + 1, max(largest, tokens))
    return {tool: counts for tool, counts in found.items() if counts[0]}


def _over_cap_sentence() -> str:
    over = _over_cap()
    total = sum(n for n, _, _ in over.values())
    names = ", ".join(f"{tool} {n} of {calls}" for tool, (n, calls, _) in over.items())
    return f"{total} response{'' if total == 1 else 's'} over {HOST_CAP:,} tokens ({names})"


@pytest.fixture(scope="module")
def report(run: Run) -> dict[str, Any]:
    run.server.stop(interrupt=True)  # the report is written as the process exits
    path = run.workdir / "server.json"
    assert path.exists(), (run.workdir / "economics-server.log").read_text(errors="replace")[-3000:]
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_the_report_has_the_same_numbers(run: Run, report: dict[str, Any]) -> None:
    want = _expected(run)
    (unused,) = [u for u in report["unused_tools"] if u["side"] == "server"]
    assert unused["server"] == SERVER
    assert (unused["tools_listed"], unused["tools_called"], unused["tools_never_called"]) == (
        want["listed"],
        want["called"],
        len(want["never"]),
    )
    assert (unused["definition_tokens"], unused["never_called_tokens"]) == (
        want["total"],
        want["never_tokens"],
    )
    assert unused["never_called_share"] == round(want["share"], 6)
    assert {t["tool"]: t["tokens"] for t in unused["never_called"]} == want["never"]
    per_call = {d["tool"]: d["tokens_per_call"] for d in report["definitions"] if d["side"] == "server"}
    assert {tool: per_call[tool] for tool in want["per_call"]} == {
        tool: round(value, 6) for tool, value in want["per_call"].items()
    }
    responses = sum(response_tokens(tool, arguments) for tool, arguments in CALLS)
    (cost,) = [c for c in report["cost"]["servers"] if c["side"] == "server"]
    assert (report["cost"]["price_per_mtok"], report["cost"]["currency"]) == (3, "USD")
    assert cost["response_tokens"] == responses
    assert cost["response_cost"] == round(responses * PRICE / 1e6, 6)
    assert cost["definition_cost_per_conversation"] == round(want["total"] * PRICE / 1e6, 6)
    assert cost["never_called_cost_per_conversation"] == round(want["never_tokens"] * PRICE / 1e6, 6)
    capped = report["host_cap"]
    over = _over_cap()
    assert (capped["tokens"], capped["exact"]) == (HOST_CAP, True)
    assert capped["responses_over"] == capped["responses_over_max"] == sum(n for n, _, _ in over.values())
    assert {o["target"]: (o["over"], o["calls"], o["max"]) for o in capped["operations"]} == over
    assert all(o["max_exact"] for o in capped["operations"])  # the exporter keeps the exact max


# --- the HTML report in a real browser --------------------------------------------------------
class _Charts(HTMLParser):
    """The data-* attributes of every chart bar, by chart id."""

    def __init__(self) -> None:
        super().__init__()
        self.chart = ""
        self.bars: dict[str, list[dict[str, str]]] = {}
        self.titles: list[str] = []
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {k: v or "" for k, v in attrs}
        if tag == "figure":
            self.chart = values.get("id", "")
        elif tag == "g" and values.get("class") == "bar":
            self.bars.setdefault(self.chart, []).append(
                {k.removeprefix("data-"): v for k, v in values.items() if k.startswith("data-")}
            )
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles.append(data)
            self._in_title = False


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )


def _distinct_pixel_bytes(png: bytes) -> int:
    """How many distinct byte values the decoded image data holds (a blank page has two or three)."""
    position, data = 8, b""
    while position < len(png):
        (length,) = struct.unpack(">I", png[position : position + 4])
        kind = png[position + 4 : position + 8]
        if kind == b"IDAT":
            data += png[position + 8 : position + 8 + length]
        position += 12 + length
    return len(set(zlib.decompress(data)))


@pytest.mark.skipif(
    shutil.which("chromium") is None and not Path("/usr/bin/chromium").exists(),
    reason="chromium is not installed",
)
def test_the_html_report_renders_in_chromium_with_the_json_numbers(
    run: Run, report: dict[str, Any], tmp_path: Path
) -> None:
    page = run.workdir / "server.html"
    url = page.as_uri()
    shot = tmp_path / "report.png"
    rendered = _chromium("--window-size=1200,2400", f"--screenshot={shot}", url)
    assert shot.exists(), rendered.stderr[-2000:]
    assert _distinct_pixel_bytes(shot.read_bytes()) > 16
    dom = _chromium("--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    console_errors = [
        line for line in dom.stderr.splitlines() if re.search(r"CONSOLE.*(error|Uncaught)", line, re.I)
    ]
    assert console_errors == []
    assert "<script" not in dom.stdout
    charts = _Charts()
    charts.feed(dom.stdout)
    assert {"Response tokens by tool", "Definition tax: tools called versus never called"} <= set(
        charts.titles
    )
    operations = {
        (o["side"], o["server"], o["method"], o["target"]): o
        for o in report["operations"]
        if o["method"] == "tools/call"
    }
    bars = {(b["side"], b["server"], b["method"], b["target"]): b for b in charts.bars["chart-responses"]}
    assert set(bars) == set(operations)
    for key, bar in bars.items():
        assert float(bar["response-tokens"]) == operations[key]["response_tokens"]
        assert int(bar["calls"]) == operations[key]["calls"]
        assert bar["risk"] == (operations[key]["worst_risk"] or "")
    (unused,) = [u for u in report["unused_tools"] if u["side"] == "server"]
    (definitions,) = [b for b in charts.bars["chart-definitions"] if b["side"] == "server"]
    assert float(definitions["never-called-tokens"]) == unused["never_called_tokens"]
    assert float(definitions["definition-tokens"]) == unused["definition_tokens"]
    assert int(definitions["tools-listed"]) == unused["tools_listed"]
    budgets = {(b["side"], b["server"]): b for b in report["budgets"]}
    for bar in charts.bars.get("chart-budgets", []):
        assert float(bar["peak"]) == pytest.approx(budgets[(bar["side"], bar["server"])]["peak"], abs=1e-6)
