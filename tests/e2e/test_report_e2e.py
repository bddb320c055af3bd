# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report exporter under the real `opentelemetry-instrument`, and `mcp-tokens top` against a
live instrumented process.

The exact demo server runs with `OTEL_METRICS_EXPORTER=prometheus,mcp_tokens_report` and
fails on padding (exit code 7); the client runs `--metrics_exporter mcp_tokens_report` (the
launcher's own flag) and fails on critical responses (exit code 9). Both make exactly the
calls of `expected.EXACT_CALLS`, so each report's token sums must equal tiktoken's counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from examples import metrics
from examples.demo_client import MARKER
from examples.processes import (
    HOST,
    Child,
    free_port,
    prometheus_env,
    read_marked_line,
    report_env,
    start_module,
)

from .conftest import require_sdk_configurator, write_calls
from .expected import EXACT_CALLS, overhead_by_tool_and_kind, response_tokens, risk_by_tool, totals_by_tool

STARTUP_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 60.0
SERVER_EXIT_CODE = 7
CLIENT_EXIT_CODE = 9


@dataclass
class Run:
    reports: dict[str, dict[str, Any]]
    exit_codes: dict[str, int | None]
    top: subprocess.CompletedProcess[str]
    workdir: Path
    client_line: dict[str, Any]


def _start_server(workdir: Path, metrics_port: int) -> tuple[Child, int]:
    mcp_port = free_port()
    env = {
        **prometheus_env("mcp-tokens-report-server", metrics_port),
        "OTEL_METRICS_EXPORTER": "prometheus,mcp_tokens_report",
        **report_env(
            [workdir / f"server{suffix}" for suffix in (".json", ".md", ".html")],
            fail_on_padding="true",
            fail_exit_code=str(SERVER_EXIT_CODE),
        ),
    }
    server = start_module(
        "report-server",
        "examples.demo_server",
        ["--port", str(mcp_port)],
        env,
        workdir,
        ports=(mcp_port, metrics_port),
    )
    return server, mcp_port


def _client_env(workdir: Path) -> dict[str, str]:
    return {
        "OTEL_SERVICE_NAME": "mcp-tokens-report-client",
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        **report_env([workdir / "client.json"], fail_on="critical", fail_exit_code=str(CLIENT_EXIT_CODE)),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_sdk_configurator()
    workdir = tmp_path_factory.mktemp("report-e2e")
    metrics_port = free_port()
    server, mcp_port = _start_server(workdir, metrics_port)
    client: Child | None = None
    try:
        server.wait_ready(STARTUP_TIMEOUT_S)
        calls = write_calls(workdir / "calls.json")
        client = start_module(
            "report-client",
            "examples.demo_client",
            ["--url", f"http://{HOST}:{mcp_port}/mcp", "--scenario", "calls", "--calls-file", str(calls)],
            _client_env(workdir),
            workdir,
            launcher_args=["--metrics_exporter", "mcp_tokens_report"],
            stdout_pipe=True,
        )
        client_line = json.loads(read_marked_line(client, MARKER, CLIENT_TIMEOUT_S))
        client_code = client.process.wait(timeout=CLIENT_TIMEOUT_S)
        # The server counts on a background worker: let it finish before `top` reads it.
        metrics.wait_for_calls(metrics_port, len(EXACT_CALLS), CLIENT_TIMEOUT_S)
        url = f"http://{HOST}:{metrics_port}/metrics"
        top = subprocess.run(
            [sys.executable, "-m", "opentelemetry.exporter.mcp_tokens.cli", "top", "--once", url],
            capture_output=True,
            text=True,
            timeout=30,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        server_code = server.stop(interrupt=True)
        reports = {
            side: json.loads((workdir / f"{side}.json").read_text(encoding="utf-8"))
            for side in ("server", "client")
            if (workdir / f"{side}.json").exists()
        }
        yield Run(reports, {"server": server_code, "client": client_code}, top, workdir, client_line)
    finally:
        if client is not None:
            client.stop()
        server.stop()


def _logs(run: Run) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in run.workdir.glob("*.log")
    )


def _calls(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["target"]: o for o in report["operations"] if o["method"] == "tools/call"}


@pytest.mark.parametrize("side", ["server", "client"])
def test_report_token_sums_equal_tiktoken(run: Run, side: str) -> None:
    assert run.client_line["errors"] == []
    assert set(run.reports) == {"server", "client"}, _logs(run)
    calls = _calls(run.reports[side])
    want = totals_by_tool()
    assert {tool: (o["calls"], o["request_tokens"], o["response_tokens"]) for tool, o in calls.items()} == {
        tool: (t.calls, t.request, t.response) for tool, t in want.items()
    }
    # The OpenTelemetry histogram keeps the exact max: the largest response of each tool.
    largest: dict[str, int] = {}
    for tool, arguments in EXACT_CALLS:
        largest[tool] = max(largest.get(tool, 0), response_tokens(tool, arguments))
    assert {tool: (o["max"], o["max_exact"]) for tool, o in calls.items()} == {
        tool: (tokens, True) for tool, tokens in largest.items()
    }
    risk = {(tool, tier): n for tool, o in calls.items() for tier, n in o["risk"].items() if n}
    assert risk == risk_by_tool()
    overhead = {(tool, kind): n for tool, o in calls.items() for kind, n in o["overhead"].items() if n}
    assert overhead == overhead_by_tool_and_kind()
    assert {tool for tool, o in calls.items() if o["padding"]} == {"policy_document"}
    assert all(o["server"] == "mcp-tokens-demo" and o["side"] == side for o in calls.values())


def test_client_fails_on_critical_with_its_exit_code_and_verdict(run: Run) -> None:
    assert run.exit_codes["client"] == CLIENT_EXIT_CODE, _logs(run)
    verdict = run.reports["client"]["verdict"]
    assert (verdict["passed"], verdict["fail_on"], verdict["exit_code"]) == (
        False,
        "critical",
        CLIENT_EXIT_CODE,
    )
    critical = sorted({tool for (tool, tier) in risk_by_tool() if tier == "critical"})
    assert [(f["rule"], f["target"]) for f in verdict["failures"]] == [("risk", tool) for tool in critical]


def test_server_fails_on_padding_and_writes_every_format(run: Run) -> None:
    assert run.exit_codes["server"] == SERVER_EXIT_CODE, _logs(run)
    verdict = run.reports["server"]["verdict"]
    assert verdict["passed"] is False and verdict["fail_on_padding"] is True
    assert [(f["rule"], f["target"]) for f in verdict["failures"]] == [("padding", "policy_document")]
    markdown = (run.workdir / "server.md").read_text(encoding="utf-8")
    page = (run.workdir / "server.html").read_text(encoding="utf-8")
    for tool in totals_by_tool():
        assert f"`{tool}`" in markdown and f"<code>{tool}</code>" in page
    # The terminal copy went to stderr (the log), not to stdout.
    assert "mcp-tokens report: mcp-tokens-report-server" in (run.workdir / "report-server.log").read_text()


def test_top_once_reads_the_live_process(run: Run) -> None:
    assert run.top.returncode == 0, run.top.stderr
    rows = {
        line.split()[3]: line.split()
        for line in run.top.stdout.splitlines()
        if line.startswith("server ") and " tools/call " in line
    }
    want = totals_by_tool()
    assert set(rows) == set(want)
    for tool, totals in want.items():
        # Side Server Operation Tool Tokens/s Calls Tokens ...
        assert rows[tool][5:7] == [str(totals.calls), f"{totals.response:,}"], rows[tool]
