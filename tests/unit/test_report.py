# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report exporter's model and renderers, from metrics recorded through the real SDK.

Every number is computed by hand from the values recorded below (the instruments and bucket
boundaries are the contract's, see semconv), never read back from the code under test.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens.report.exit_status import ExitGate
from opentelemetry.exporter.mcp_tokens.report.exporter import CUMULATIVE, McpTokensReportExporter
from opentelemetry.exporter.mcp_tokens.report.model import Report, build_report
from opentelemetry.exporter.mcp_tokens.report.render_html import render_html
from opentelemetry.exporter.mcp_tokens.report.render_json import render_json
from opentelemetry.exporter.mcp_tokens.report.render_markdown import render_markdown
from opentelemetry.exporter.mcp_tokens.report.render_terminal import render_terminal, render_text
from opentelemetry.exporter.mcp_tokens.report.rows import OperationRow
from opentelemetry.exporter.mcp_tokens.report.series import Histogram, Snapshot
from opentelemetry.exporter.mcp_tokens.report.settings import ReportFile, ReportSettings
from opentelemetry.exporter.mcp_tokens.report.state import MetricState
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    InMemoryMetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import Resource

SERVER = "shop"
# Long enough never to tick; the reader's thread still makes the final collection at shutdown.
HOUR_MS = 3_600_000
HOSTILE = "<script>alert(1)</script>|[x](http://evil.example)`\x1b[31m"


class Exits:
    """Records the exit code the gate would have ended the process with."""

    def __init__(self) -> None:
        self.codes: list[int] = []

    def __call__(self, code: int) -> None:
        self.codes.append(code)


def _base(tool: str, side: str = "client", method: str = "tools/call") -> dict[str, str]:
    return {
        semconv.SIDE: side,
        semconv.MCP_METHOD_NAME: method,
        semconv.SERVER_NAME: SERVER,
        semconv.GEN_AI_TOOL_NAME: tool,
        semconv.TOKENS_ENCODING: "o200k_base",
    }


def record_run(provider: MeterProvider) -> None:
    """A small run: three calls of `search`, one of `HOSTILE`, a listing, budgets, padding, cost."""
    meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens")
    payload = meter.create_histogram(
        semconv.PAYLOAD, unit="{token}", explicit_bucket_boundaries_advisory=semconv.TOKEN_BUCKETS
    )
    responses = meter.create_counter(semconv.RESPONSES)
    overhead = meter.create_counter(semconv.OVERHEAD)
    padding = meter.create_counter(semconv.PADDING_DETECTIONS)
    definition = meter.create_gauge(semconv.TOOL_DEFINITION)
    utilization = meter.create_histogram(
        semconv.BUDGET_UTILIZATION_METRIC, explicit_bucket_boundaries_advisory=semconv.UTILIZATION_BUCKETS
    )
    crossings = meter.create_counter(semconv.BUDGET_CROSSINGS)
    duration = meter.create_histogram(
        semconv.CLIENT_OPERATION_DURATION, explicit_bucket_boundaries_advisory=semconv.DURATION_BUCKETS
    )
    analysis = meter.create_histogram(
        semconv.ANALYSIS_DURATION, explicit_bucket_boundaries_advisory=semconv.ANALYSIS_BUCKETS
    )
    skipped = meter.create_counter(semconv.ANALYSIS_SKIPPED)

    search = _base("search")
    for tokens, tier in ((100, "low"), (300, "low"), (5000, "high")):
        payload.record(tokens, {**search, semconv.DIRECTION: "response"})
        payload.record(7, {**search, semconv.DIRECTION: "request"})
        responses.add(1, {**search, semconv.DIRECTION: "response", semconv.TOKENS_RISK: tier})
    overhead.add(400, {**search, semconv.DIRECTION: "response", semconv.OVERHEAD_KIND: "formatting"})
    overhead.add(140, {**search, semconv.DIRECTION: "response", semconv.OVERHEAD_KIND: "duplicate"})
    duration.record(0.03, {semconv.MCP_METHOD_NAME: "tools/call", semconv.GEN_AI_TOOL_NAME: "search"})
    duration.record(
        0.2,
        {
            semconv.MCP_METHOD_NAME: "tools/call",
            semconv.GEN_AI_TOOL_NAME: "search",
            semconv.ERROR_TYPE: "tool_error",
        },
    )

    hostile = _base(HOSTILE)
    payload.record(9000, {**hostile, semconv.DIRECTION: "response"})
    responses.add(1, {**hostile, semconv.DIRECTION: "response", semconv.TOKENS_RISK: "critical"})
    padding_attributes = {
        semconv.SIDE: "client",
        semconv.MCP_METHOD_NAME: "tools/call",
        semconv.GEN_AI_TOOL_NAME: HOSTILE,
    }
    padding.add(2, {**padding_attributes, semconv.PADDING_REASON: "invisible"})

    listing = {k: v for k, v in _base("").items() if k != semconv.GEN_AI_TOOL_NAME}
    listing[semconv.MCP_METHOD_NAME] = "tools/list"
    payload.record(9500, {**listing, semconv.DIRECTION: "response"})  # large, but listings never gate
    responses.add(1, {**listing, semconv.DIRECTION: "response", semconv.TOKENS_RISK: "critical"})
    for tool, tokens in (("search", 120), (HOSTILE, 80), ("retired", 0)):
        definition.set(
            tokens, {semconv.SIDE: "client", semconv.SERVER_NAME: SERVER, semconv.GEN_AI_TOOL_NAME: tool}
        )

    for value in (0.2, 0.8, 0.95):
        utilization.record(value, {semconv.SIDE: "client", semconv.SERVER_NAME: SERVER})
    crossings.add(1, {semconv.SIDE: "client", semconv.BUDGET_LEVEL: "warning"})
    crossings.add(1, {semconv.SIDE: "client", semconv.BUDGET_LEVEL: "critical"})
    for seconds in (0.002, 0.004):
        analysis.record(seconds, {semconv.SIDE: "client", semconv.MCP_METHOD_NAME: "tools/call"})
    skipped.add(
        3, {semconv.SIDE: "client", semconv.MCP_METHOD_NAME: "tools/call", semconv.SKIP_REASON: "overload"}
    )


def run_exporter(settings: ReportSettings, exits: Exits) -> McpTokensReportExporter:
    exporter = McpTokensReportExporter(settings=settings, gate=ExitGate(exit_function=exits))
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=HOUR_MS)
    provider = MeterProvider(
        metric_readers=[reader], resource=Resource.create({"service.name": "svc"}), shutdown_on_exit=False
    )
    record_run(provider)
    provider.shutdown()  # the reader collects once more, then shuts the exporter down
    return exporter


@pytest.fixture
def report() -> Report:
    exporter = run_exporter(ReportSettings(terminal=False), Exits())
    assert exporter.report is not None
    return exporter.report


def _row(report: Report, target: str, method: str = "tools/call") -> OperationRow:
    return next(r for r in report.rows if (r.target, r.method) == (target, method))


def test_per_tool_numbers_are_exact_and_quantiles_are_bucket_estimates(report: Report) -> None:
    row = _row(report, "search")
    assert (row.side, row.server, row.calls) == ("client", SERVER, 3)
    assert row.response_tokens == 5400 and row.request_tokens == 21
    assert row.mean == 1800 and row.max == 5000 and row.max_is_exact
    # p50: rank 1.5 falls in (256, 1000] holding one response: 256 + 744 * 0.5.
    assert row.p50 == pytest.approx(628.0)
    # p95: rank 2.85 in (4096, 8000]: 4096 + 3904 * 0.85 = 7414.4, capped by the exact max.
    assert row.p95 == 5000
    assert row.risk == {"low": 2, "high": 1}
    assert row.overhead == {"formatting": 400, "duplicate": 140}
    assert row.overhead_ratio == pytest.approx(540 / 5400)
    assert row.duration.count == 2 and row.errors == 1
    assert row.duration.maximum == pytest.approx(0.2)


def test_padding_joins_its_tool_and_budgets_definitions_cost_and_totals(report: Report) -> None:
    hostile = _row(report, HOSTILE)
    assert hostile.padding == {"invisible": 2} and hostile.server == SERVER
    (budget,) = report.budgets
    assert (budget.side, budget.server, budget.observations) == ("client", SERVER, 3)
    assert budget.peak == pytest.approx(0.95) and budget.peak_is_exact
    assert budget.mean == pytest.approx((0.2 + 0.8 + 0.95) / 3)
    assert report.crossings == {("client", "critical"): 1, ("client", "warning"): 1}
    assert [(d.tool, d.tokens) for d in report.definitions] == [("search", 120), (HOSTILE, 80)]
    (cost,) = report.costs
    assert (cost.analyses, cost.skipped) == (2, {"overload": 3})
    assert cost.seconds == pytest.approx(0.006) and cost.max_seconds == pytest.approx(0.004)
    (totals,) = report.totals
    assert (totals.calls, totals.response_tokens, totals.request_tokens) == (5, 5400 + 9000 + 9500, 21)
    assert (totals.overhead_tokens, totals.padding, totals.definition_tokens) == (540, 2, 200)
    assert report.service == "svc" and report.verdict.passed


def test_fail_on_gates_tool_calls_at_or_above_the_tier_not_listings(report: Report) -> None:
    snapshot_report = _rebuild(report, fail_on="high")
    failures = {(f.rule, f.target) for f in snapshot_report.verdict.failures}
    assert failures == {("risk", "search"), ("risk", HOSTILE)}
    assert _rebuild(report, fail_on="critical").verdict.failures[0].target == HOSTILE
    assert len(_rebuild(report, fail_on="critical").verdict.failures) == 1
    padding = _rebuild(report, fail_on_padding=True).verdict
    assert not padding.passed and [(f.rule, f.detail) for f in padding.failures] == [
        ("padding", "invisible 2")
    ]
    assert padding.exit_code == 4


def _rebuild(report: Report, fail_on: str | None = None, fail_on_padding: bool = False) -> Report:
    settings = ReportSettings(
        terminal=False, fail_on=fail_on, fail_on_padding=fail_on_padding, fail_exit_code=4
    )
    exits = Exits()
    exporter = run_exporter(settings, exits)
    assert exporter.report is not None
    return exporter.report


def test_a_failed_gate_sets_the_exit_code_and_the_json_verdict(tmp_path: Path) -> None:
    exits = Exits()
    path = tmp_path / "out" / "report.json"
    settings = ReportSettings(
        files=(ReportFile(path, "json"),), terminal=False, fail_on="critical", fail_exit_code=5
    )
    exporter = McpTokensReportExporter(settings=settings, gate=(gate := ExitGate(exit_function=exits)))
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=HOUR_MS)
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    record_run(provider)
    provider.shutdown()
    gate.run()  # what the atexit hook does
    assert exits.codes == [5]
    verdict = json.loads(path.read_text(encoding="utf-8"))["verdict"]
    assert verdict["passed"] is False and verdict["exit_code"] == 5
    assert [f["target"] for f in verdict["failures"]] == [HOSTILE]


def test_a_passing_run_never_exits_and_a_never_shut_down_provider_still_reports(tmp_path: Path) -> None:
    exits = Exits()
    path = tmp_path / "report.md"
    gate = ExitGate(exit_function=exits)
    exporter = McpTokensReportExporter(
        settings=ReportSettings(files=(ReportFile(path, "markdown"),), terminal=False, fail_on="critical"),
        gate=gate,
    )
    exporter.export(InMemoryMetricReader().get_metrics_data())  # type: ignore[arg-type]
    gate.run()  # the provider was never shut down: the report is written from what was exported
    assert exits.codes == [] and path.exists()
    assert "No MCP operation was analysed" in path.read_text(encoding="utf-8")


def test_delta_points_are_added_up() -> None:
    state = MetricState()
    for _ in range(2):
        delta_reader = InMemoryMetricReader(
            preferred_temporality=_all_delta(),
        )
        provider = MeterProvider(metric_readers=[delta_reader], shutdown_on_exit=False)
        meter = provider.get_meter("t")
        meter.create_histogram(
            semconv.PAYLOAD, explicit_bucket_boundaries_advisory=semconv.TOKEN_BUCKETS
        ).record(10, {**_base("a"), semconv.DIRECTION: "response"})
        meter.create_counter(semconv.RESPONSES).add(1, {**_base("a"), semconv.TOKENS_RISK: "low"})
        data = delta_reader.get_metrics_data()
        assert data is not None
        state.update(data)
        provider.shutdown()
    row = build_report(state.snapshot()).rows[0]
    assert (row.calls, row.response_tokens, row.risk) == (2, 20, {"low": 2})


def _all_delta() -> dict[type, AggregationTemporality]:
    return dict.fromkeys(CUMULATIVE, AggregationTemporality.DELTA)


def test_series_beyond_the_cap_are_counted_not_kept() -> None:
    state = MetricState(max_series=2)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    counter = provider.get_meter("t").create_counter(semconv.RESPONSES)
    for index in range(5):
        counter.add(1, {**_base(f"tool{index}"), semconv.TOKENS_RISK: "low"})
    data = reader.get_metrics_data()
    assert data is not None
    state.update(data)
    snapshot = state.snapshot()
    assert (len(snapshot.series), snapshot.dropped_series) == (2, 3)


def test_histogram_quantiles_by_hand() -> None:
    # 10 observations: 4 in (0, 1], 6 in (1, 10]; no min/max known (Prometheus).
    histogram = Histogram(10, 40.0, (1.0, 10.0), (4, 6, 0))
    assert histogram.quantile(0.5) == pytest.approx(1 + 9 * (5 - 4) / 6)
    assert histogram.quantile(0.2) == pytest.approx(0.5)
    assert histogram.upper_bound() == 10.0
    overflow = Histogram(2, 50.0, (1.0, 10.0), (0, 1, 1))
    assert overflow.upper_bound() == math.inf
    assert Histogram(0, 0.0, (1.0,), (0, 0)).quantile(0.5) is None


# --- renderers ------------------------------------------------------------------------------------
def test_html_escapes_every_peer_supplied_name(report: Report) -> None:
    page = render_html(report, max_rows=100)
    assert "<script>" not in page and "\x1b" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "\\x1b[31m" in page
    # Operations, budgets, definitions, tools never called, instrumentation cost.
    assert page.count("<table>") == 5


def test_markdown_keeps_names_inert(report: Report) -> None:
    text = render_markdown(report, max_rows=100)
    assert "\x1b" not in text and "<script>" not in text.replace("`<script>", "")
    line = next(line for line in text.splitlines() if "alert(1)" in line)
    # The name is one code span (fenced by more backticks than it holds), its | escaped.
    assert "``<script>alert(1)</script>\\|[x](http://evil.example)`\\x1b[31m``" in line
    assert line.count(" | ") == 12 - 1  # no extra cell from the name's "|"
    search = next(line for line in text.splitlines() if "`search`" in line)
    assert "| 3 | 5,400 | 1,800 | ≈628 | ≈5,000 | 5,000 | low 2 · high 1 |" in search


def test_text_report_shows_control_characters_as_escapes(report: Report) -> None:
    text = render_text(report, max_rows=100, width=250)
    assert "\x1b" not in text and "\\x1b[31m" in text
    assert "client: 5 responses · 23,900 response tokens · 21 request tokens · 540 overhead" in text
    assert "critical 1, warning 1" in text


def test_json_report_has_every_field(report: Report) -> None:
    document = json.loads(render_json(report))
    assert (document["format"], document["version"], document["service"]) == ("mcp-tokens.report", 1, "svc")
    search = next(o for o in document["operations"] if o["target"] == "search")
    assert search == {
        "side": "client",
        "server": SERVER,
        "method": "tools/call",
        "target": "search",
        "calls": 3,
        "response_tokens": 5400,
        "request_tokens": 21,
        "mean": 1800,
        "p50_estimate": 628,
        "p95_estimate": 5000,
        "max": 5000,
        "max_exact": True,
        "risk": {"low": 2, "medium": 0, "high": 1, "critical": 0},
        "worst_risk": "high",
        "overhead": {"duplicate": 140, "formatting": 400},
        "overhead_tokens": 540,
        "overhead_ratio": 0.1,
        "padding": {},
        "duration_s": search["duration_s"],
        "errors": 1,
        "encodings": ["o200k_base"],
        "cost": None,
    }
    assert search["duration_s"]["count"] == 2 and search["duration_s"]["max"] == 0.2
    assert document["verdict"] == {
        "passed": True,
        "fail_on": None,
        "fail_on_padding": False,
        "fail_on_host_cap": False,
        "exit_code": 0,
        "failures": [],
    }
    assert document["crossings"] == [
        {"side": "client", "level": "critical", "scopes": 1},
        {"side": "client", "level": "warning", "scopes": 1},
    ]


def test_row_limit_cuts_tables_and_says_so(report: Report) -> None:
    text = render_text(report, max_rows=1, width=250)
    assert "+2 more rows in the JSON report" in text  # 3 operations, 1 shown
    assert len(json.loads(render_json(report))["operations"]) == 3


def test_empty_snapshot_renders_in_every_format() -> None:
    empty = build_report(Snapshot())
    assert "No MCP operation was analysed" in render_text(empty, 10)
    assert "No MCP operation was analysed" in render_markdown(empty, 10)
    assert "No MCP operation was analysed" in render_html(empty, 10)
    assert json.loads(render_json(empty))["operations"] == []


# --- settings -------------------------------------------------------------------------------------
def test_settings_from_the_environment(tmp_path: Path) -> None:
    env = {
        "OTEL_SERVICE_NAME": "api/v1",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_PATH": f"{tmp_path}/r-{{pid}}.json, {tmp_path}/{{service}}.md,x.pdf",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_TERMINAL": "false",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_FAIL_ON": "HIGH",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_FAIL_ON_PADDING": "true",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_FAIL_EXIT_CODE": "3",
    }
    settings = ReportSettings.from_env(env, pid=42)
    assert settings.files == (
        ReportFile(tmp_path / "r-42.json", "json"),
        ReportFile(tmp_path / "api_v1.md", "markdown"),
    )
    assert (settings.terminal, settings.fail_on, settings.fail_on_padding) == (False, "high", True)
    assert settings.fail_exit_code == 3 and settings.gates


def test_bad_settings_fall_back_to_their_defaults(caplog: pytest.LogCaptureFixture) -> None:
    env = {
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_TERMINAL": "maybe",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_FAIL_ON": "severe",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_FAIL_EXIT_CODE": "0",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_MAX_ROWS": "lots",
    }
    assert ReportSettings.from_env(env) == ReportSettings()
    assert len(caplog.records) == 4


def test_an_unwritable_path_is_logged_and_the_other_files_are_written(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory", encoding="utf-8")
    good = tmp_path / "report.html"
    settings = ReportSettings(
        files=(ReportFile(blocker / "report.json", "json"), ReportFile(good, "html")), terminal=False
    )
    exporter = run_exporter(settings, Exits())
    assert exporter.report is not None and good.exists()
    assert any("could not write" in record.getMessage() for record in caplog.records)


def test_terminal_report_goes_to_stderr_and_never_to_stdout(
    report: Report, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    render_terminal(report, max_rows=10)
    captured = capsys.readouterr()
    assert captured.out == "" and "mcp-tokens report: svc" in captured.err
    monkeypatch.setattr("sys.stderr", None)  # no stderr at all: nothing is printed anywhere
    render_terminal(report, max_rows=10)
    assert capsys.readouterr().out == ""
