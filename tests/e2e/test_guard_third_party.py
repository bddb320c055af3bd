# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard on a server nobody here wrote: the reference `mcp-server-git` under the real
`opentelemetry-instrument`, over stdio, turned on with guard variables only. An
uninstrumented client compares what it receives with what the same server sends
uninstrumented, and counts it with tiktoken alone."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings, names
from opentelemetry.exporter.mcp_tokens.dashboards.expressions import dashboard_expressions
from prometheus_client.parser import text_string_to_metric_families

from examples.processes import HOST, free_port, prometheus_env
from tests.integration.apps._line import IS_MCP2

from .conftest import fast_alert_rules, require_sdk_configurator
from .monitoring import running_prometheus
from .test_third_party_server import _console_script, make_repository, result_tokens

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.skipif(not IS_MCP2, reason="mcp-server-git needs mcp >= 2.3; this is the 1.x line"),
]

GUARD = "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD"
NOTICE = "[mcp-tokens cut this result"
REFUSED = "[mcp-tokens refused this result"
SCRAPE_DEADLINE_S = 20.0
ALERT_DEADLINE_S = 60.0


def calls_for(repo: Path) -> list[tuple[str, dict[str, Any]]]:
    path = str(repo)
    return [
        ("git_status", {"repo_path": path}),
        ("git_diff", {"repo_path": path, "target": "HEAD~3"}),
        ("git_show", {"repo_path": path, "revision": "HEAD~1"}),
    ]


async def call_all(
    server: list[str], env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    params = StdioServerParameters(command=server[0], args=server[1:], env=env)
    with anyio.fail_after(120):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            results = []
            for name, arguments in calls:
                result = await session.call_tool(name, arguments)
                results.append(result.model_dump(by_alias=True, exclude_none=True, mode="json"))
            if "OTEL_EXPORTER_PROMETHEUS_PORT" in env:
                results.append(
                    await anyio.to_thread.run_sync(wait_for_actions, env["OTEL_EXPORTER_PROMETHEUS_PORT"])
                )
    return results


def wait_for_actions(port: str) -> dict[tuple[str, str], float]:
    """mcp_tokens_guard_actions_total by (tool, action), once the server has recorded any."""
    deadline = time.monotonic() + SCRAPE_DEADLINE_S
    found: dict[tuple[str, str], float] = {}
    while not found and time.monotonic() < deadline:
        time.sleep(0.25)
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
                text = response.read().decode()
        except OSError:
            continue
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "mcp_tokens_guard_actions_total":
                    labels = sample.labels
                    found[(labels["gen_ai_tool_name"], labels["mcp_tokens_guard_action"])] = sample.value
    return found


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"])


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    yield make_repository(tmp_path)


@pytest.fixture
def unguarded(repository: Path) -> list[dict[str, Any]]:
    """What mcp-server-git sends with no instrumentation at all."""
    server = [_console_script("mcp-server-git"), "--repository", str(repository)]
    return anyio.run(call_all, server, dict(os.environ), calls_for(repository))  # type: ignore[no-any-return]


def guarded_run(repository: Path, guard_env: dict[str, str], *, scrape: bool = False) -> list[Any]:
    server = [
        _console_script("opentelemetry-instrument"),
        _console_script("mcp-server-git"),
        "--repository",
        str(repository),
    ]
    exporters = (
        prometheus_env("guarded-git", free_port())
        if scrape
        else {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    )
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("OTEL_INSTRUMENTATION_MCP_TOKENS_")
    }
    return anyio.run(call_all, server, {**env, **exporters, **guard_env}, calls_for(repository))  # type: ignore[no-any-return]


def test_truncate_cuts_the_large_diff_only(repository: Path, unguarded: list[dict[str, Any]]) -> None:
    require_sdk_configurator()
    status, diff, _, actions = guarded_run(
        repository, {GUARD: "truncate", GUARD + "_MAX_RESULT_TOKENS": "2000"}, scrape=True
    )
    plain_status, plain_diff, _ = unguarded
    assert result_tokens(plain_diff) > 2000, "the diff must be large for this test"
    assert status == plain_status  # small: untouched
    assert result_tokens(diff) <= 2000
    *kept, notice = diff["content"]
    assert notice["text"].startswith(NOTICE) and "git_diff" in notice["text"]
    assert text_of(plain_diff).startswith("".join(block["text"] for block in kept))
    assert actions.get(("git_diff", "truncated")) == 1, actions


def test_reject_turns_the_large_diff_into_an_error_result(
    repository: Path, unguarded: list[dict[str, Any]]
) -> None:
    status, diff, _ = guarded_run(repository, {GUARD: "reject", GUARD + "_MAX_RESULT_TOKENS": "2000"})
    assert status == unguarded[0]
    assert diff["isError"] is True and text_of(diff).startswith(REFUSED)
    assert result_tokens(diff) <= 2000


def test_a_tool_limit_touches_that_tool_only(repository: Path, unguarded: list[dict[str, Any]]) -> None:
    limits = {
        GUARD: "truncate",
        GUARD + "_MAX_RESULT_TOKENS": "200000",
        GUARD + "_TOOL_LIMITS": "git_diff=1500",
    }
    status, diff, show = guarded_run(repository, limits)
    plain_status, plain_diff, plain_show = unguarded
    assert result_tokens(plain_show) > 1500  # over git_diff's limit, under the default one
    assert (status, show) == (plain_status, plain_show)
    assert result_tokens(diff) <= 1500 and text_of(diff) != text_of(plain_diff)


GUARD_METRICS = (names.GUARD_ACTIONS_TOTAL, names.GUARD_REMOVED_TOTAL)


def test_guardrails_panels_and_alert_on_a_live_prometheus(
    repository: Path, monitoring_binaries: tuple[str, str], tmp_path: Path
) -> None:
    """The Guardrails panels return data and McpToolFrequentlyCut fires (its `for:` at 0 s)
    on what a real Prometheus scraped from the guarded server."""
    require_sdk_configurator()
    metrics_port = free_port()
    env = {
        **{key: value for key, value in os.environ.items() if not key.startswith("OTEL_")},
        **prometheus_env("guarded-git", metrics_port),
        GUARD: "truncate",
        GUARD + "_MAX_RESULT_TOKENS": "2000",
    }
    server = [
        _console_script("opentelemetry-instrument"),
        _console_script("mcp-server-git"),
        "--repository",
        str(repository),
    ]
    rules = fast_alert_rules(tmp_path / "rules")
    with running_prometheus(
        monitoring_binaries[0], tmp_path / "prometheus", {"guarded-git": [metrics_port]}, [rules]
    ) as prometheus:
        empty, alerts = anyio.run(_guarded_session, server, env, calls_for(repository), prometheus)
    assert empty == []
    # Both large tools are cut in every call; git_status never is.
    assert {alert["gen_ai_tool_name"] for alert in alerts} == {"git_diff", "git_show"}, alerts


async def _guarded_session(
    server: list[str], env: dict[str, str], calls: list[tuple[str, dict[str, Any]]], prometheus: Any
) -> tuple[list[str], list[dict[str, Any]]]:
    params = StdioServerParameters(command=server[0], args=server[1:], env=env)
    with anyio.fail_after(170):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            # Rounds a few scrapes apart: rate() needs the counters to grow between scrapes.
            for _ in range(3):
                for name, arguments in calls:
                    await session.call_tool(name, arguments)
                await anyio.sleep(3.0)
            return await anyio.to_thread.run_sync(_check_prometheus, prometheus)


def _check_prometheus(prometheus: Any) -> tuple[list[str], list[dict[str, Any]]]:
    prometheus.wait_until(
        f'increase({names.GUARD_ACTIONS_TOTAL}{{job="guarded-git"}}[1m])',
        lambda result: any(float(item["value"][1]) > 0 for item in result),
        SCRAPE_DEADLINE_S,
    )
    empty = []
    for expression in dashboard_expressions(GeneratorSettings()):
        guard_panel = any(metric in expression.expr for metric in GUARD_METRICS)
        if guard_panel and not prometheus.vector(expression.substituted({"job": "guarded-git"})):
            empty.append(f"{expression.source}: {expression.expr}")
    # The alert also needs the calls' payload counts, which the analysis records after the
    # calls (later on a loaded machine).
    firing = prometheus.wait_until(
        'ALERTS{alertname="McpToolFrequentlyCut", alertstate="firing"}',
        lambda result: len(result) >= 2,
        ALERT_DEADLINE_S,
    )
    return empty, [item["metric"] for item in firing]
