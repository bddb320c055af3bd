# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A server nobody here wrote: the reference `mcp-server-git` (a low-level `Server` with its
own twelve tools, run as its own console script) under the real `opentelemetry-instrument`,
over stdio, on a repository made for the test. An uninstrumented client makes the calls and
computes, from what it received and with tiktoken alone, what docs/telemetry.md says each
payload costs; the server's Prometheus endpoint must report exactly that, for every tool
call, error results included, and for every tool definition of its listing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from prometheus_client.parser import text_string_to_metric_families

from examples.processes import HOST, free_port, prometheus_env
from tests.integration.apps._line import IS_MCP2

from .conftest import require_sdk_configurator
from .expected import compact, definition_tokens, result_tokens, text_tokens

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not IS_MCP2, reason="mcp-server-git needs mcp >= 2.3; this is the 1.x line"),
]

SERVER_NAME = "mcp-git"
SCRAPE_DEADLINE_S = 30.0


def _console_script(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable} (the Makefile installs it)")
    return str(path)


def _git(repo: Path, *args: str) -> None:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="Test",
        GIT_AUTHOR_EMAIL="test@example.invalid",
        GIT_COMMITTER_NAME="Test",
        GIT_COMMITTER_EMAIL="test@example.invalid",
        GIT_AUTHOR_DATE="2026-01-01T00:00:00Z",
        GIT_COMMITTER_DATE="2026-01-01T00:00:00Z",
    )
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


def make_repository(root: Path) -> Path:
    """Five commits of a JSON inventory and a log file, so that diffs and logs run to tens of
    KB (a realistic, large tool result) and hold both JSON and prose."""
    repo = root / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for commit in range(5):
        records = [{"sku": f"A-{i:05d}", "qty": (i * 7 + commit) % 97, "note": "ok"} for i in range(400)]
        (repo / "inventory.json").write_text(json.dumps(records, indent=2), encoding="utf-8")
        lines = [f"2026-01-0{commit + 1} 10:{i % 60:02d} worker {i} did batch {commit}" for i in range(300)]
        (repo / "app.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"Inventory and log, revision {commit}")
    return repo


def calls_for(repo: Path) -> list[tuple[str, dict[str, Any]]]:
    path = str(repo)
    return [
        ("git_status", {"repo_path": path}),
        ("git_log", {"repo_path": path, "max_count": 10}),
        ("git_show", {"repo_path": path, "revision": "HEAD~1"}),
        ("git_diff", {"repo_path": path, "target": "HEAD~3"}),
        ("git_branch", {"repo_path": path, "branch_type": "local"}),
        ("git_log", {"repo_path": str(repo.parent / "missing"), "max_count": 1}),  # an error result
    ]


async def run_client(server: list[str], env: dict[str, str], calls: list[tuple[str, dict[str, Any]]]) -> Any:
    params = StdioServerParameters(command=server[0], args=server[1:], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listing = await session.list_tools()
        tools = [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools]
        results = []
        for name, arguments in calls:
            result = await session.call_tool(name, arguments)
            results.append(result.model_dump(by_alias=True, exclude_none=True, mode="json"))
        port = env["OTEL_EXPORTER_PROMETHEUS_PORT"]
        scraped = await anyio.to_thread.run_sync(wait_for_counts, port, tools, calls, results)
    return tools, results, scraped


def expected_series(
    tools: list[dict[str, Any]], calls: list[tuple[str, dict[str, Any]]], results: list[dict[str, Any]]
) -> dict[tuple[str, str, str], float]:
    expected: dict[tuple[str, str, str], float] = defaultdict(float)
    for (name, arguments), result in zip(calls, results, strict=True):
        expected[("payload_sum", name, "request")] += text_tokens(compact(arguments))
        expected[("payload_sum", name, "response")] += result_tokens(result)
    for tool in tools:
        expected[("definition", tool["name"], "")] = definition_tokens(tool)
    return dict(expected)


def scrape(port: str) -> dict[tuple[str, str, str], float]:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if labels.get("mcp_tokens_side") != "server":
                continue
            if sample.name == "mcp_tokens_analysis_skipped_total":  # no server label: one server here
                found[("skipped", labels["mcp_tokens_skip_reason"], labels["mcp_method_name"])] = sample.value
            elif labels.get("mcp_tokens_server_name") != SERVER_NAME:
                continue
            elif sample.name == "mcp_tokens_payload_sum" and labels.get("mcp_method_name") == "tools/call":
                key = ("payload_sum", labels["gen_ai_tool_name"], labels["mcp_tokens_direction"])
                found[key] = sample.value
            elif sample.name == "mcp_tokens_tool_definition":
                found[("definition", labels["gen_ai_tool_name"], "")] = sample.value
    return found


def wait_for_counts(
    port: str,
    tools: list[dict[str, Any]],
    calls: list[tuple[str, dict[str, Any]]],
    results: list[dict[str, Any]],
) -> dict[tuple[str, str, str], float]:
    """Scrape until every expected series is there with the expected value (the analysis runs
    after each call), or until the deadline; the last scrape either way."""
    expected = expected_series(tools, calls, results)
    deadline = time.monotonic() + SCRAPE_DEADLINE_S
    while True:
        try:
            found = scrape(port)
        except OSError:
            found = {}
        if all(found.get(key) == value for key, value in expected.items()) or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    yield make_repository(tmp_path)


def test_every_call_to_a_third_party_server_is_counted_exactly(repository: Path) -> None:
    require_sdk_configurator()
    server = [
        _console_script("opentelemetry-instrument"),
        _console_script("mcp-server-git"),
        "--repository",
        str(repository),
    ]
    env = {**os.environ, **prometheus_env("third-party-git", free_port())}
    calls = calls_for(repository)

    tools, results, scraped = anyio.run(run_client, server, env, calls)

    assert len(tools) >= 10, [tool["name"] for tool in tools]
    assert results[-1].get("isError") is True  # the error result reached the client as sent
    assert all(result.get("isError") is not True for result in results[:-1])
    sizes = [len(json.dumps(result)) for result in results]
    assert max(sizes) > 20_000, sizes  # a large result is among them
    expected = expected_series(tools, calls, results)
    assert {key: scraped.get(key) for key in expected} == expected
    assert not any(value for key, value in scraped.items() if key[0] == "skipped"), scraped
