# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard on real servers and clients, on whichever SDK line this venv has (both run it).

Every delivered result is checked with tiktoken alone (`v2_support.tool_result_tokens`: the
block rules of docs/telemetry.md), never with the guard's own counts: within the limit, the
notice present, a prefix of what the tool returned, structuredContent still valid against
the tool's outputSchema (jsonschema), results under the limit identical to unguarded ones.

- in memory: server and client both instrumented in this process (the server cuts; the
  client's guard then sees a result that fits and passes it untouched);
- stdio and streamable HTTP: the server in its own process under `opentelemetry-instrument`
  with guard variables only, and an uninstrumented client; then the reverse (an
  uninstrumented server, the client's guard).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp  # noqa: F401 -- imported before instrument(), as an MCP application has it: the guard comes with the patches
import pytest
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, budget_scope
from opentelemetry.instrumentation.mcp_tokens.guard.remote import RemoteMeasure
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import Measure
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel

from tests.integration.apps import payloads
from tests.integration.apps._line import HAS_FASTMCP, IS_MCP1
from tests.integration.apps.client import Target, connect
from tests.integration.apps.harness import REPO_ROOT, running_server, server_command, subprocess_env
from tests.integration.v2_support import count, select, tool_result_tokens
from tests.metric_points import points_of

if IS_MCP1:  # the SDK's own high-level server on each line
    from mcp.server.fastmcp import FastMCP as SdkServer
else:
    from mcp.server.mcpserver import MCPServer as SdkServer
if HAS_FASTMCP:
    import fastmcp

pytestmark = pytest.mark.timeout(180)

FLAVOURS = ("lowlevel", "sdk_fastmcp", "fastmcp")
NOTICE = "[mcp-tokens cut this result"
REFUSED = "[mcp-tokens refused this result"
LIMIT = 1000
GUARD_ENV = "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD"


@dataclass
class Telemetry:
    instrumentor: McpTokensInstrumentor
    reader: InMemoryMetricReader

    def drain(self) -> None:
        assert self.instrumentor.pipeline.force_flush(20.0), "the analysis worker did not drain"

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        self.drain()
        return points_of(self.reader, name)


@contextlib.contextmanager
def instrumented(**settings: Any) -> Iterator[Telemetry]:
    """The instrumentation with a tracer provider of its own: the global one stays unset, so
    fastmcp's and the SDK's own spans stay off for the other tests of this process."""
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), meter_provider=meter_provider, **settings)
    assert instrumentor.pipeline is not None, "instrument() did not start (see the log)"
    try:
        yield Telemetry(instrumentor, reader)
    finally:
        instrumentor.uninstrument()
        meter_provider.shutdown()


@contextlib.contextmanager
def guarded(**settings: Any) -> Iterator[Telemetry]:
    """`instrumented(...)` with the guard's tokenizer loaded (a loaded CI machine can take
    longer than the guard waits on the response path, and the guard would fail open)."""
    with instrumented(**settings) as telemetry:
        assert telemetry.instrumentor.guard is not None
        assert telemetry.instrumentor.guard.wait_ready(60.0)
        yield telemetry


def run(coroutine: Any) -> Any:
    async def bounded() -> Any:
        with anyio.fail_after(120):
            return await coroutine

    return anyio.run(bounded)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result["content"] if block.get("type") == "text")


def assert_cut(result: dict[str, Any], original: str, limit: int) -> None:
    """Within `limit` by tiktoken, the notice last, and a prefix of `original` before it."""
    assert tool_result_tokens(result) <= limit
    *kept, notice = result["content"]
    assert notice["type"] == "text" and notice["text"].startswith(NOTICE), notice
    delivered = "".join(block["text"] for block in kept)
    assert delivered and original.startswith(delivered)
    assert len(delivered) < len(original)


async def calls(target: Target, requests: list[tuple[str, dict[str, Any]]], client: str = "sdk") -> list[Any]:
    async with connect(target, client=client) as driver:
        await driver.list_tools()
        return [await driver.call_tool(name, arguments) for name, arguments in requests]


# --- in memory, both sides in this process ---------------------------------------------------
@pytest.mark.parametrize("flavour", FLAVOURS)
def test_truncate_in_memory(flavour: str) -> None:
    with guarded(
        guard="truncate", guard_max_result_tokens=LIMIT, guard_tool_limits="sized=300,records=0"
    ) as t:
        sized, pretty, records, echo, structured = run(
            calls(
                Target(flavour, "memory"),
                [
                    ("sized", {"tokens_hint": 5000}),
                    ("pretty_json", {"n": 200}),
                    ("records", {"n": 200}),
                    ("echo", {"text": "hello"}),
                    ("structured", {"n": 30}),
                ],
            )
        )
        assert_cut(sized.result, payloads.sized_text(5000), 300)  # its own limit
        assert_cut(pretty.result, payloads.pretty_json_text(200), LIMIT)  # the default limit
        assert records.text == payloads.records_json(200)  # 0: no limit for this tool
        assert tool_result_tokens(records.result) > LIMIT
        assert echo.text == "hello"
        # The text repeats structuredContent: the text is shortened, structuredContent kept whole.
        assert structured.result["structuredContent"] == payloads.structured_content(30)
        assert tool_result_tokens(structured.result) <= LIMIT
        assert structured.result["content"][-1]["text"].startswith(NOTICE)
        t.drain()
        t.instrumentor.guard.shutdown()
        actions = t.points("mcp_tokens.guard.actions")
        assert {a["gen_ai.tool.name"] for a, _ in select(actions, mcp_tokens__guard__action="truncated")} == {
            "sized",
            "pretty_json",
            "structured",
        }
        for attributes, point in t.points("mcp_tokens.guard.removed"):
            if attributes["gen_ai.tool.name"] == "sized":
                assert point.value == 5000 - tool_result_tokens(sized.result)


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_reject_in_memory(flavour: str) -> None:
    with guarded(guard="reject", guard_max_result_tokens=LIMIT):
        big, small = run(
            calls(Target(flavour, "memory"), [("sized", {"tokens_hint": 5000}), ("echo", {"text": "x"})])
        )
    assert big.error_code is None and big.result["isError"] is True  # a tool error, not a protocol error
    assert big.text.startswith(REFUSED) and "sized returned about" in big.text and "1,000" in big.text
    assert tool_result_tokens(big.result) <= LIMIT
    assert "structuredContent" not in big.result
    assert small.text == "x"


REQUESTS_UNDER_LIMIT = [
    ("echo", {"text": "hello"}),
    ("records", {"n": 20}),
    ("structured", {"n": 5}),
    ("image", {}),
    ("fail", {}),
]


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_results_under_the_limit_are_identical(flavour: str) -> None:
    with instrumented():
        plain = run(calls(Target(flavour, "memory"), REQUESTS_UNDER_LIMIT))
    with guarded(guard="truncate", guard_budget="reject", guard_repeat_limit=50):
        delivered = run(calls(Target(flavour, "memory"), REQUESTS_UNDER_LIMIT))
    assert [outcome.result for outcome in delivered] == [outcome.result for outcome in plain]


# --- structuredContent and its outputSchema ----------------------------------------------------
class Row(BaseModel):
    id: int
    name: str
    note: str


class Rows(BaseModel):
    rows: list[Row]


def _rows(n: int) -> Rows:
    return Rows(rows=[Row(id=i, name=f"row-{i}", note="alpha bravo delta echo " * 3) for i in range(n)])


def schema_server(flavour: str) -> Any:
    """A server whose `rows` tool declares an outputSchema (generated from `Rows`)."""
    server: Any = fastmcp.FastMCP("guard-schema") if flavour == "fastmcp" else SdkServer("guard-schema")

    def rows(n: int) -> Rows:
        """Return n rows."""
        return _rows(n)

    server.tool()(rows)
    return server


@pytest.mark.parametrize("flavour", ["sdk_fastmcp", "fastmcp"])
def test_structured_content_stays_valid(flavour: str) -> None:
    async def scenario() -> tuple[dict[str, Any], Any, Any]:
        async with connect(Target(flavour, "memory", server=schema_server(flavour))) as driver:
            tools = {tool["name"]: tool for tool in await driver.list_tools()}
            fits = await driver.call_tool("rows", {"n": 20})
            over = await driver.call_tool("rows", {"n": 400})
            return tools["rows"]["outputSchema"], fits, over

    with guarded(guard="truncate", guard_max_result_tokens=LIMIT):
        schema, fits, over = run(scenario())
    expected = _rows(20).model_dump()
    # The text copy is cut; structuredContent is whole and valid.
    assert fits.result["structuredContent"] == expected
    jsonschema.validate(fits.result["structuredContent"], schema)
    assert tool_result_tokens(fits.result) <= LIMIT
    assert fits.result["content"][-1]["text"].startswith(NOTICE)
    # structuredContent alone over the limit: an error result carrying the notice, and no
    # structuredContent to be invalid.
    assert over.result["isError"] is True and over.result.get("structuredContent") is None
    assert over.text.startswith(NOTICE)
    assert tool_result_tokens(over.result) <= LIMIT


# --- repeats and budgets -----------------------------------------------------------------------
def test_repeat_limit() -> None:
    with guarded(guard="truncate", guard_repeat_limit=2, guard_repeat_window=60) as t:
        outcomes = run(
            calls(
                Target("lowlevel", "memory"),
                [("echo", {"text": "same"})] * 3 + [("echo", {"text": "other"})],
            )
        )
        t.drain()
        t.instrumentor.guard.shutdown()
        actions = t.points("mcp_tokens.guard.actions")
    assert [o.text for o in outcomes[:2]] == ["same", "same"]
    third = outcomes[2]
    assert third.result.get("isError") is not True and "withheld" in third.text  # the notice alone
    assert outcomes[3].text == "other"
    assert {a["mcp_tokens.guard.reason"] for a, _ in actions} == {"repeat"}


def test_budget_scope_across_two_servers() -> None:
    async def scenario() -> list[Any]:
        outcomes = []
        with budget_scope("conversation-1", context_window=3000):
            for flavour in ("lowlevel", "sdk_fastmcp"):
                async with connect(Target(flavour, "memory")) as driver:
                    outcomes.append(await driver.call_tool("sized", {"tokens_hint": 2000}))
        return outcomes

    with guarded(guard_budget="truncate"):
        first, second = run(scenario())
    assert first.text == payloads.sized_text(2000)  # fits the window
    # The second server's result gets only what the conversation has left.
    assert_cut(second.result, payloads.sized_text(2000), 3000 - 2000)


# --- fail open -----------------------------------------------------------------------------------
def test_fails_open_when_the_tokenizer_cannot_load(tmp_path: Path) -> None:
    broken = tmp_path / "broken.tiktoken"
    broken.write_text("this is not a tokenizer\n")
    with guarded(guard="truncate", guard_max_result_tokens=LIMIT, tokenizer_file=str(broken)) as t:
        (outcome,) = run(calls(Target("lowlevel", "memory"), [("sized", {"tokens_hint": 5000})]))
        failures = t.points("mcp_tokens.guard.failures")
    assert outcome.text == payloads.sized_text(5000)
    assert select(failures, mcp_tokens__guard__failure="no_exact_tokenizer")


def test_fails_open_when_counting_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: object, text: str) -> int:
        raise RuntimeError("tokenizer failure")

    monkeypatch.setattr(Measure, "count", broken)  # in this process
    monkeypatch.setattr(RemoteMeasure, "count", broken)  # or asked of the counting service
    with guarded(guard="truncate", guard_max_result_tokens=LIMIT) as t:
        (outcome,) = run(calls(Target("fastmcp", "memory"), [("sized", {"tokens_hint": 5000})]))
        failures = t.points("mcp_tokens.guard.failures")
    assert outcome.text == payloads.sized_text(5000)
    assert select(failures, mcp_tokens__guard__failure="error")


# --- over stdio and streamable HTTP, one side instrumented -------------------------------------
def _instrument_command() -> list[str]:
    path = Path(sys.executable).with_name("opentelemetry-instrument")
    found = str(path) if path.exists() else shutil.which("opentelemetry-instrument")
    assert found, "opentelemetry-instrument is not installed"
    return [found]


GUARDED_SERVER_ENV = {
    GUARD_ENV: "truncate",
    GUARD_ENV + "_MAX_RESULT_TOKENS": str(LIMIT),
    GUARD_ENV + "_TOOL_LIMITS": "records=0",
    "OTEL_TRACES_EXPORTER": "none",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_LOGS_EXPORTER": "none",
}


@pytest.fixture
def instrumented_python(tmp_path: Path) -> Iterator[str]:
    """An executable that runs Python under opentelemetry-instrument (a stdio server's `python`)."""
    wrapper = tmp_path / "python-instrumented"
    wrapper.write_text(f'#!/bin/sh\nexec {_instrument_command()[0]} {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    yield str(wrapper)


SERVER_SIDE_REQUESTS = [("sized", {"tokens_hint": 5000}), ("records", {"n": 200}), ("echo", {"text": "hi"})]


def _check_server_side(outcomes: list[Any]) -> None:
    sized, records, echo = outcomes
    assert_cut(sized.result, payloads.sized_text(5000), LIMIT)
    assert records.text == payloads.records_json(200)
    assert echo.text == "hi"


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_server_guard_over_stdio(flavour: str, instrumented_python: str) -> None:
    target = Target(flavour, "stdio", env=GUARDED_SERVER_ENV, python=instrumented_python)
    _check_server_side(run(calls(target, SERVER_SIDE_REQUESTS)))


@pytest.mark.parametrize("flavour", FLAVOURS)
def test_server_guard_over_streamable_http(flavour: str) -> None:
    with running_server(
        flavour, "streamable-http", env=GUARDED_SERVER_ENV, command_prefix=_instrument_command()
    ) as server:
        outcomes = run(
            calls(Target(flavour, "streamable-http", base_url=server.base_url), SERVER_SIDE_REQUESTS)
        )
    _check_server_side(outcomes)


@pytest.mark.parametrize("client", ["sdk", "fastmcp"])
def test_client_guard_over_stdio(client: str) -> None:
    with guarded(guard="truncate", guard_max_result_tokens=LIMIT):
        sized, echo = run(
            calls(
                Target("lowlevel", "stdio"),
                [("sized", {"tokens_hint": 5000}), ("echo", {"text": "hi"})],
                client,
            )
        )
    assert_cut(sized.result, payloads.sized_text(5000), LIMIT)
    assert echo.text == "hi"


@pytest.mark.parametrize("client", ["sdk", "fastmcp"])
def test_client_guard_over_streamable_http(client: str) -> None:
    with running_server("sdk_fastmcp", "streamable-http") as server, guarded(guard="reject"):
        (outcome,) = run(
            calls(
                Target("sdk_fastmcp", "streamable-http", base_url=server.base_url),
                [("sized", {"tokens_hint": 30_000})],
                client,
            )
        )
    assert outcome.result["isError"] is True and outcome.text.startswith(REFUSED)
    assert count(outcome.text) <= 25_000


# --- guard off: nothing changes, nothing loads ---------------------------------------------------
RAW_CALLS = [
    ("sized", {"tokens_hint": 3000}),
    ("structured", {"n": 5}),
    ("image", {}),
    ("records", {"n": 50}),
]


def _raw_stdio_responses(argv: list[str], env: dict[str, str]) -> list[bytes]:
    """The response lines a stdio server writes for RAW_CALLS, byte for byte."""
    process = subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=REPO_ROOT
    )
    assert process.stdin is not None and process.stdout is not None
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    messages += [
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        for i, (name, arguments) in enumerate(RAW_CALLS, start=1)
    ]
    responses: dict[int, bytes] = {}
    try:
        for message in messages:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            if "id" in message:
                while message["id"] not in responses:
                    line = process.stdout.readline()
                    assert line, "the server closed its output"
                    answer = json.loads(line)
                    if "id" in answer:
                        responses[answer["id"]] = line
        return [responses[i] for i in range(1, len(RAW_CALLS) + 1)]
    finally:
        process.stdin.close()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.mark.parametrize("flavour", ["lowlevel", "fastmcp"])
def test_guard_off_and_results_under_the_limit_are_byte_for_byte_unchanged(flavour: str) -> None:
    argv = server_command(flavour, "stdio")
    quiet = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    plain = _raw_stdio_responses(argv, subprocess_env())
    observed = _raw_stdio_responses([*_instrument_command(), *argv], subprocess_env(quiet))
    guarded = _raw_stdio_responses(
        [*_instrument_command(), *argv], subprocess_env({**quiet, GUARD_ENV: "reject"})
    )
    assert observed == plain
    assert guarded == plain  # every result is under the default 25,000 tokens


def test_guard_off_loads_nothing_of_the_guard() -> None:
    script = (
        "import sys\n"
        "from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor\n"
        "instrumentor = McpTokensInstrumentor()\n"
        "instrumentor.instrument()\n"
        "assert instrumentor.guard is None\n"
        "loaded = sorted(m for m in sys.modules if '.mcp_tokens.guard.' in m)\n"
        "instrumentor.uninstrument()\n"
        "print(loaded)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
