# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Claude encodings end to end: a server run under the real `opentelemetry-instrument` with
OTEL_INSTRUMENTATION_MCP_TOKENS_ENCODING=claude-4.7 reports, on its Prometheus endpoint, the
response tokens ctok gives for what the client received, block by block, on payloads made
from a seed chosen at run time (prose, code, JSON, CJK, padding, bidi and more).

Needs ctok (the `claude` extra, Python >= 3.12): `make unit-claude` runs it in .venv-claude.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families

from examples.processes import HOST, free_port, launcher, prometheus_env
from tests.corpora import claude as claude_corpus

from .claude_server import SERVER_NAME
from .conftest import require_sdk_configurator

pytestmark = [
    pytest.mark.claude,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        importlib.util.find_spec("ctok") is None,
        reason="ctok is not installed (the `claude` extra, Python >= 3.12): make unit-claude",
    ),
]

ENCODING = "claude-4.7"
KINDS = (
    "prose",
    "code",
    "json_pretty",
    "json_compact",
    "cjk",
    "padding",
    "bidi",
    "emoji",
    "oddities",
    "hindi",
)
TOLERANCE = 0.005
SCRAPE_DEADLINE_S = 60.0
REPO_ROOT = Path(__file__).resolve().parents[2]


def ctok_tokens(text: str) -> int:
    """ctok's own count of `text` as one message, without its frame."""
    import ctok  # noqa: PLC0415
    from ctok.main import _family, _model  # noqa: PLC0415

    return len(ctok.tokenize(text, "4.7")) - int(_model(_family("4.7")).message_overhead)


def payloads(seed: int) -> dict[str, list[str]]:
    """Per tool, a few text blocks of one kind (block rules count each on its own)."""
    texts = claude_corpus.texts(seed, 9_000)
    found = {}
    for kind in KINDS:
        body = texts[kind]
        third = len(body) // 3
        found[kind] = [body[:third], body[third : 2 * third], body[2 * third :]]
    # Over Codex CLI's 10 KiB and 256 lines, and Claude Code's 50,000 characters.
    found["big"] = ["\n".join(texts["log"].splitlines() * 40)[:60_000]]
    return found


async def call_every_tool(server: list[str], env: dict[str, str], names: list[str]) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters  # noqa: PLC0415
    from mcp.client.stdio import stdio_client  # noqa: PLC0415

    params = StdioServerParameters(command=server[0], args=server[1:], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await session.list_tools()
        results = []
        for name in names:
            result = await session.call_tool(name, {})
            results.append(result.model_dump(by_alias=True, exclude_none=True, mode="json"))
        # Scrape while the server still runs (its analysis comes after each call).
        scraped = await anyio.to_thread.run_sync(wait_for_series, env["OTEL_EXPORTER_PROMETHEUS_PORT"], names)
    return {"results": results, "scraped": scraped}


def scrape(port: str) -> dict[str, tuple[float, str]]:
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    found: dict[str, tuple[float, str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "mcp_tokens_host_over_limit_total" and labels.get("gen_ai_tool_name") == "big":
                host, limit = labels["mcp_tokens_host"], labels["mcp_tokens_host_limit"]
                found[f"over:{host}:{limit}"] = (sample.value, "")
            if sample.name == "mcp_tokens_tools" and labels.get("mcp_tokens_side") == "server":
                found["tools"] = (sample.value, "")
            if (
                sample.name == "mcp_tokens_payload_sum"
                and labels.get("mcp_tokens_side") == "server"
                and labels.get("mcp_tokens_server_name") == SERVER_NAME
                and labels.get("mcp_method_name") == "tools/call"
                and labels.get("mcp_tokens_direction") == "response"
            ):
                found[labels["gen_ai_tool_name"]] = (sample.value, labels.get("mcp_tokens_encoding", ""))
    return found


def wait_for_series(port: str, names: list[str]) -> dict[str, tuple[float, str]]:
    deadline = time.monotonic() + SCRAPE_DEADLINE_S
    while True:
        try:
            found = scrape(port)
        except OSError:
            found = {}
        if set(names) | {"over:codex:bytes", "tools"} <= set(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def test_scraped_response_sums_equal_ctoks_content_counts(tmp_path: Path) -> None:
    require_sdk_configurator()
    seed = secrets.randbits(32)
    print(f"payload seed: {seed}")  # to reproduce a failure
    file = tmp_path / "payloads.json"
    file.write_text(json.dumps(payloads(seed)), encoding="utf-8")
    env = {
        **os.environ,
        **prometheus_env("claude-e2e", free_port()),
        "OTEL_INSTRUMENTATION_MCP_TOKENS_ENCODING": ENCODING,
        "OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS": "claude-code,codex",
        "MCP_TOKENS_E2E_PAYLOADS": str(file),
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    server = [launcher(sys.executable), sys.executable, "-m", "tests.e2e.claude_server"]
    names = [*KINDS, "big"]

    outcome = anyio.run(call_every_tool, server, env, names)

    scraped = outcome["scraped"]
    assert set(names) <= set(scraped), f"seed {seed}: missing series {set(names) - set(scraped)}"
    worst = 0.0
    for name, result in zip(names, outcome["results"], strict=True):
        received = [block["text"] for block in result["content"]]
        want = sum(ctok_tokens(text) for text in received)
        got, encoding = scraped[name]
        assert encoding == ENCODING, (name, encoding)
        assert abs(got - want) <= TOLERANCE * want, f"seed {seed}: {name}: scraped {got}, ctok {want}"
        worst = max(worst, abs(got - want) / want)
    print(f"largest difference from ctok: {worst:.4%}")
    # The chosen hosts' limits, measured by the counting service.
    assert scraped["tools"][0] == len(names)
    (big,) = [block["text"] for block in outcome["results"][-1]["content"]]
    crossed = {
        "over:claude-code:tokens": ctok_tokens(big) > 25_000,
        "over:claude-code:chars": len(big) > 50_000,
        "over:codex:bytes": len(big.encode()) > 10_240,
        "over:codex:lines": big.count("\n") + 1 > 256,
    }
    assert crossed["over:codex:bytes"] and crossed["over:claude-code:chars"]
    found = {key for key in scraped if key.startswith("over:")}
    assert found == {key for key, over in crossed.items() if over}
