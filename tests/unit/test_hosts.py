# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Host limits (engine/hosts.py): the table, the checks, the setting, the analysis' counter,
the telemetry, and the report's section."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.report.hostlimits import host_limits
from opentelemetry.exporter.mcp_tokens.report.model import build_report
from opentelemetry.exporter.mcp_tokens.report.render_json import report_document
from opentelemetry.exporter.mcp_tokens.report.series import Snapshot
from opentelemetry.exporter.mcp_tokens.report.settings import ReportSettings
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters, Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import (
    BYTES,
    CHARS,
    HOSTS,
    LINES,
    TOKENS,
    ResultSize,
    crossed_result_limits,
    parse_hosts,
    text_size,
    token_encodings,
)
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.telemetry import Instruments, Recorder
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.metric_points import points_of


def test_the_table_holds_every_host_the_cli_names() -> None:
    assert list(HOSTS) == ["claude-code", "codex", "copilot-cli", "vscode", "cursor", "windsurf", "gemini"]
    assert [HOSTS[name].tool_limit for name in ("vscode", "cursor", "windsurf", "gemini")] == [
        128,
        80,
        50,
        512,
    ]
    claude_code = HOSTS["claude-code"]
    assert claude_code.encoding == "claude-4.7"
    assert claude_code.limit(TOKENS).value == semconv.HOST_RESULT_CAP  # type: ignore[union-attr]
    assert (TOKENS, 10_000) in claude_code.warnings
    assert {limit.kind: limit.value for limit in HOSTS["codex"].limits} == {BYTES: 10_240, LINES: 256}


def test_host_names_parse_in_order_once_and_name_the_bad_one() -> None:
    assert parse_hosts([" VSCode", "codex", "vscode", ""]) == ("vscode", "codex")
    with pytest.raises(ValueError, match="'teams'"):
        parse_hosts(["codex", "teams"])
    assert token_encodings(["codex", "claude-code", "vscode"]) == ("claude-4.7",)


def test_the_setting_is_a_comma_list_and_a_typo_keeps_the_default(caplog: pytest.LogCaptureFixture) -> None:
    env = "OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS"
    assert Settings.load(environ={env: "claude-code, codex"}).hosts == ("claude-code", "codex")
    assert Settings.load({"hosts": ["vscode"]}, {}).hosts == ("vscode",)
    assert Settings.load(environ={env: "claude-code,teams"}).hosts == ()
    assert "teams" in caplog.text


def test_a_limit_is_crossed_only_by_more_than_it() -> None:
    codex = HOSTS["codex"]
    at = ResultSize(chars=10_240, bytes=10_240, lines=256, tokens={})
    assert crossed_result_limits(codex, at) == ()
    over = ResultSize(chars=10, bytes=10_241, lines=257, tokens={})
    assert [limit.kind for limit in crossed_result_limits(codex, over)] == [BYTES, LINES]
    # A token limit needs the count in the host's encoding; without it nothing is claimed.
    claude_code = HOSTS["claude-code"]
    assert crossed_result_limits(claude_code, ResultSize(60_000, 60_000, 1, {})) == (
        claude_code.limit(CHARS),
    )
    counted = ResultSize(10, 10, 1, {"claude-4.7": 25_001})
    assert crossed_result_limits(claude_code, counted) == (claude_code.limit(TOKENS),)


def test_text_size_counts_what_hosts_measure() -> None:
    assert text_size(["héllo\nworld", "", "x"]) == (12, 13, 3)


# --- the analysis and the telemetry -------------------------------------------------------------
def _job(method: str, response_kind: PayloadKind, seq: int = 1) -> Job:
    return Job(
        seq=seq,
        side=semconv.SIDE_SERVER,
        method=method,
        target="dump" if method == "tools/call" else None,
        server_name="files",
        error_type=None,
        end_ns=time.time_ns(),
        request_kind=None,
        response_kind=response_kind,
    )


@pytest.fixture(scope="module")
def analyst(counters: Counters) -> Analyst:
    return Analyst(Settings(hosts=("claude-code", "codex", "vscode")), counters)


def test_the_analysis_finds_each_hosts_limits_in_its_own_unit(analyst: Analyst) -> None:
    lines = "\n".join(f"line {n}: all quiet" for n in range(300))  # 300 lines, ~6 KB
    findings = analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT), None, _result(lines))
    assert findings.host_limits == (("codex", LINES),)
    big = "The quarterly report lists revenue by region and product line. " * 3_200  # ~40k Claude tokens
    findings = analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT, 2), None, _result(big))
    assert set(findings.host_limits) == {("claude-code", TOKENS), ("claude-code", CHARS), ("codex", BYTES)}
    small = analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT, 3), None, _result("ok"))
    assert small.host_limits == ()


def test_a_listing_reports_its_tool_count_however_labels_fold(analyst: Analyst) -> None:
    tools = [{"name": f"tool_{n}", "inputSchema": {"type": "object"}} for n in range(300)]
    findings = analyst.analyse(_job("tools/list", PayloadKind.TOOL_LIST), None, {"tools": tools})
    assert findings.tool_count == 300
    assert findings.host_limits == ()


def test_behind_the_token_limits_are_checked_on_the_estimate(analyst: Analyst) -> None:
    big = "The quarterly report lists revenue by region and product line. " * 3_200  # ~40k Claude tokens
    job = dataclasses.replace(_job("tools/call", PayloadKind.TOOL_RESULT, 4), behind=True)
    findings = analyst.analyse(job, None, _result(big))
    assert findings.backlog
    assert set(findings.host_limits) == {("claude-code", TOKENS), ("claude-code", CHARS), ("codex", BYTES)}


def test_without_hosts_nothing_is_measured(counters: Counters) -> None:
    analyst = Analyst(Settings(), counters)
    findings = analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT), None, _result("x" * 100_000))
    assert findings.host_limits == ()


def _record_a_400_line_result_and_a_130_tool_listing(recorder: Recorder, analyst: Analyst) -> None:
    lines = "\n".join(f"line {n}" for n in range(400))
    call = Exchange(side=Side.SERVER, method="tools/call", target="dump", end_ns=1)
    recorder.record_findings(
        call, analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT), None, _result(lines))
    )
    tools = [{"name": f"t{n}", "inputSchema": {"type": "object"}} for n in range(130)]
    listing = Exchange(side=Side.SERVER, method="tools/list", end_ns=1)
    recorder.record_findings(
        listing, analyst.analyse(_job("tools/list", PayloadKind.TOOL_LIST), None, {"tools": tools})
    )


def test_the_telemetry_counts_responses_over_and_sets_the_tool_gauge(analyst: Analyst) -> None:
    reader = InMemoryMetricReader()
    recorder = Recorder(Instruments(MeterProvider(metric_readers=[reader]).get_meter("test")))
    _record_a_400_line_result_and_a_130_tool_listing(recorder, analyst)
    ((attributes, point),) = points_of(reader, semconv.HOST_OVER_LIMIT)
    assert point.value == 1
    assert attributes[semconv.HOST] == "codex" and attributes[semconv.HOST_LIMIT] == LINES
    assert attributes[semconv.GEN_AI_TOOL_NAME] == "dump"
    ((attributes, point),) = points_of(reader, semconv.TOOLS)
    assert point.value == 130 and attributes[semconv.SERVER_NAME] == "files"


def _result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


# --- the report ----------------------------------------------------------------------------------
def _snapshot() -> Snapshot:
    series: dict[Any, Any] = {}

    def add(name: str, attributes: dict[str, str], value: float) -> None:
        series[(name, tuple(sorted(attributes.items())))] = value

    over = {
        semconv.SIDE: "server",
        semconv.SERVER_NAME: "files",
        semconv.MCP_METHOD_NAME: "tools/call",
        semconv.GEN_AI_TOOL_NAME: "dump",
        semconv.HOST: "claude-code",
        semconv.HOST_LIMIT: TOKENS,
    }
    add(semconv.HOST_OVER_LIMIT, over, 3.0)
    add(semconv.HOST_OVER_LIMIT, {**over, semconv.HOST: "codex", semconv.HOST_LIMIT: BYTES}, 1.0)
    add(semconv.TOOLS, {semconv.SIDE: "server", semconv.SERVER_NAME: "big"}, 130.0)
    add(semconv.TOOLS, {semconv.SIDE: "server", semconv.SERVER_NAME: "small"}, 20.0)
    return Snapshot(series=series, service="svc")


def test_the_report_lists_responses_over_and_servers_over_a_tool_limit() -> None:
    limits = host_limits(_snapshot(), ("vscode", "claude-code"))
    assert limits is not None
    assert [(r.host, r.limit, r.responses, r.threshold) for r in limits.over] == [
        ("claude-code", TOKENS, 3, 25_000),
        ("codex", BYTES, 1, 10_240),
    ]
    assert [(c.host, c.server, c.tools) for c in limits.tool_counts] == [("vscode", "big", 130)]
    assert limits.summary() == [
        "VS Code (Copilot): big lists 130 tools (it takes 128)",
        "Claude Code: 3 responses over 25,000 tokens",
        "Codex CLI: 1 response over 10,240 bytes",
    ]
    document = report_document(build_report(_snapshot(), hosts=("vscode",)))
    assert document["hosts"]["tool_counts_over"] == [
        {"host": "vscode", "limit": 128, "side": "server", "server": "big", "tools": 130}
    ]
    assert host_limits(Snapshot(service="svc"), ()) is None


def test_the_report_reads_the_hosts_setting() -> None:
    env = {"OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS": "vscode,codex"}
    assert ReportSettings.from_env(env, pid=1).hosts == ("vscode", "codex")
    assert ReportSettings.from_env({"OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS": "nope"}, pid=1).hosts == ()


def test_the_report_exporter_and_top_read_the_host_metrics(analyst: Analyst) -> None:
    """Through the real instruments: the report exporter's own reader, and top's parse of the
    Prometheus exporter's text."""
    from opentelemetry.exporter.mcp_tokens.report.exporter import McpTokensReportExporter  # noqa: PLC0415
    from opentelemetry.exporter.mcp_tokens.report.prometheus import snapshot_from_text  # noqa: PLC0415
    from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: PLC0415
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader  # noqa: PLC0415
    from prometheus_client import CollectorRegistry, generate_latest  # noqa: PLC0415

    exporter = McpTokensReportExporter(settings=ReportSettings(terminal=False, hosts=("vscode",)))
    registry = CollectorRegistry()
    readers = [PeriodicExportingMetricReader(exporter, 3_600_000), PrometheusMetricReader(registry=registry)]
    provider = MeterProvider(metric_readers=readers, shutdown_on_exit=False)
    recorder = Recorder(Instruments(provider.get_meter("opentelemetry.instrumentation.mcp_tokens")))
    _record_a_400_line_result_and_a_130_tool_listing(recorder, analyst)
    text = generate_latest(registry).decode()
    provider.shutdown()

    want = ["VS Code (Copilot): files lists 130 tools (it takes 128)", "Codex CLI: 1 response over 256 lines"]
    assert exporter.report is not None and exporter.report.hosts is not None
    assert exporter.report.hosts.summary() == want
    scraped = build_report(snapshot_from_text(text), hosts=("vscode",)).hosts
    assert scraped is not None and scraped.summary() == want


def test_a_host_tokenizer_that_fails_leaves_the_exchanges_own_counts(
    counters: Counters, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(encoding: str, max_bytes: int) -> None:
        raise OSError("no such tokenizer")

    analyst = Analyst(Settings(hosts=("claude-code", "codex")), counters)
    monkeypatch.setattr(counters, "host", broken)
    lines = "\n".join(f"line {n}" for n in range(300))
    findings = analyst.analyse(_job("tools/call", PayloadKind.TOOL_RESULT, 9), None, _result(lines))
    assert findings.error is None and findings.response is not None and findings.response.exact
    assert findings.host_limits == ()
