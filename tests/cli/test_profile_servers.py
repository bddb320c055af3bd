# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens profile` against the integration test servers (tests/integration/apps): the SDK's
low-level server, its FastMCP/MCPServer and standalone fastmcp, on whichever mcp line this venv has,
over stdio, streamable HTTP and SSE. Expected definition tokens are computed by hand: tiktoken on the
compact JSON of each tool, as a raw pipe client (no SDK) received it."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.cli import connect, profile
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import TOOL_DEFINITION_FIELDS

from tests.cli import rawclient
from tests.cli.conftest import REPO_ROOT, CliRunner
from tests.integration.apps import harness, payloads
from tests.integration.apps._line import HAS_FASTMCP, IS_MCP2
from tests.structure_expected import structure_tokens

pytestmark = pytest.mark.timeout(180)

FLAVOURS = [flavour for flavour in harness.FLAVOURS if flavour != "fastmcp" or HAS_FASTMCP]


def stdio_command(flavour: str) -> list[str]:
    return ["python", "-m", harness.server_module(flavour), "--transport", "stdio"]


def hand_count(o200k: Any, tool: dict[str, Any]) -> int:
    shown = {key: value for key, value in tool.items() if key in TOOL_DEFINITION_FIELDS}
    return len(o200k.encode_ordinary(json.dumps(shown, separators=(",", ":"), ensure_ascii=False)))


@pytest.fixture(scope="module")
def servers() -> Iterator[
    tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str], harness.RunningServer]]
]:
    """Each flavour's listing as its stdio server wrote it (fetched by the raw pipe client), and the
    HTTP servers; all started at once, as the imports of their frameworks dominate the time."""
    specs = [(flavour, "streamable-http") for flavour in FLAVOURS] + [("lowlevel", "sse")]
    env = harness.subprocess_env()
    with tempfile.TemporaryDirectory(prefix="mcp-tokens-cli-") as logs:
        http = {spec: harness.start_server(*spec, Path(logs)) for spec in specs}
        try:
            with ThreadPoolExecutor(len(FLAVOURS)) as pool:
                futures = {
                    flavour: pool.submit(
                        rawclient.list_tools, [sys.executable, *stdio_command(flavour)[1:]], REPO_ROOT, env
                    )
                    for flavour in FLAVOURS
                }
                raw = {flavour: future.result() for flavour, future in futures.items()}
            for server in http.values():
                harness.wait_ready(server, 60.0)
            yield raw, http
        finally:
            for server in http.values():
                harness.stop_process(server.process)


@pytest.fixture(scope="module")
def raw_listings(servers: Any) -> dict[str, list[dict[str, Any]]]:
    return servers[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def http_servers(servers: Any) -> dict[tuple[str, str], harness.RunningServer]:
    return servers[1]  # type: ignore[no-any-return]


def profiled(run_cli: CliRunner, *argv: str) -> dict[str, Any]:
    result = run_cli("profile", "--format", "json", "--protocol", "legacy", *argv)
    assert result.code == 0, result.err
    document: dict[str, Any] = json.loads(result.out)
    return document


def assert_matches_hand_count(document: dict[str, Any], raw: list[dict[str, Any]], o200k: Any) -> None:
    expected = [(tool["name"], hand_count(o200k, tool)) for tool in raw]
    assert [(tool["name"], tool["definition"]["tokens"]) for tool in document["tools"]] == expected
    assert document["totals"]["definition_tokens"] == sum(tokens for _, tokens in expected)
    assert [name for name, _ in expected] == list(payloads.TOOL_NAMES)
    # None of the shared tools declares an outputSchema: every bound is unknown, none is guessed.
    assert document["totals"]["unknown_bound_tools"] == list(payloads.TOOL_NAMES)
    assert all(tool["output"]["worst_case_tokens"] is None for tool in document["tools"])


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_stdio_profile_matches_the_hand_count(
    run_cli: CliRunner, raw_listings: dict[str, list[dict[str, Any]]], o200k: Any, flavour: str
) -> None:
    document = profiled(run_cli, "--", *stdio_command(flavour))
    assert document["server"]["name"] == payloads.SERVER_NAMES[flavour]
    assert_matches_hand_count(document, raw_listings[flavour], o200k)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_streamable_http_profile_matches_the_hand_count(
    run_cli: CliRunner,
    raw_listings: dict[str, list[dict[str, Any]]],
    http_servers: dict[tuple[str, str], harness.RunningServer],
    o200k: Any,
    flavour: str,
) -> None:
    server = http_servers[(flavour, "streamable-http")]
    document = profiled(run_cli, "--url", server.base_url + "/mcp", "--header", "X-Test: cli")
    assert document["target"] == server.base_url + "/mcp"
    assert_matches_hand_count(document, raw_listings[flavour], o200k)


def test_sse_profile_matches_the_hand_count(
    run_cli: CliRunner,
    raw_listings: dict[str, list[dict[str, Any]]],
    http_servers: dict[tuple[str, str], harness.RunningServer],
    o200k: Any,
) -> None:
    server = http_servers[("lowlevel", "sse")]
    document = profiled(run_cli, "--url", server.base_url + "/sse", "--transport", "sse")
    assert_matches_hand_count(document, raw_listings["lowlevel"], o200k)


def test_a_real_tool_call_is_analysed_by_the_engine(
    run_cli: CliRunner, http_servers: dict[tuple[str, str], harness.RunningServer], o200k: Any
) -> None:
    url = http_servers[("lowlevel", "streamable-http")].base_url + "/mcp"
    document = profiled(run_cli, "--url", url, "--call", "structured", "--args", '{"n": 5}')
    call = next(tool["call"] for tool in document["tools"] if tool["name"] == "structured")

    def count(text: str) -> int:
        return len(o200k.encode_ordinary(text))

    text = count(payloads.structured_text(5))
    structured = count(json.dumps(payloads.structured_content(5), separators=(",", ":")))
    # The text copy keeps the records (structure); the structuredContent copy is all duplicate.
    table = structure_tokens(payloads.structured_content(5), text, count)
    assert (call["tokens"], call["blocks"], call["overhead"]) == (
        text + structured,
        2,
        {"duplicate": structured, "structure": table},
    )


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_protocol_auto_is_counted_as_received(
    http_servers: dict[tuple[str, str], harness.RunningServer], o200k: Any, flavour: str
) -> None:
    """`--protocol auto` (the default): an mcp 2.x client speaks 2026-07-28, whose tools/list differs
    in key order from the handshake era's (so counts may differ by a token); mcp 1.x always uses the
    handshake. Either way the CLI counts exactly what it received."""

    class Quiet:
        def update(self, message: str) -> None:
            del message

    url = http_servers[(flavour, "streamable-http")].base_url + "/mcp"
    target = connect.Target(url=url, transport=connect.Transport.STREAMABLE_HTTP)
    snapshot = connect.fetch(target, connect.Limits(timeout_s=30), Quiet())
    assert snapshot.info.protocol_version == ("2026-07-28" if IS_MCP2 else rawclient.PROTOCOL_VERSION)
    loader = profile.start_tokenizer("o200k_base")
    result = profile.build_profile(snapshot, profile.exact_counter(loader), profile.Settings(), url)
    assert [(t.name, t.definition.tokens) for t in result.tools] == [
        (tool["name"], hand_count(o200k, dict(tool))) for tool in snapshot.tools
    ]
    assert [t.name for t in result.tools] == list(payloads.TOOL_NAMES)
