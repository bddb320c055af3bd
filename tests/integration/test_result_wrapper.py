# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Real frameworks, both SDK lines: a tool that returns a str, a number, a boolean or a list gets
its value twice, as text and as `structuredContent: {"result": value}`. The wrapper is counted
as `duplicate` overhead on both sides, exactly its own tokens (docs/telemetry.md, Overhead).

Servers: the SDK's own framework (`MCPServer` on mcp 2.x, the bundled `FastMCP` on 1.x) and
the standalone fastmcp (4 on 2.x, 3 on 1.x), each in memory with its own client."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import pytest
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, semconv
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from tests.integration.apps._line import HAS_FASTMCP, IS_MCP2
from tests.integration.v2_support import compact, count
from tests.metric_points import points_of

if IS_MCP2:  # the SDK's own framework on each line, and its in-memory client
    from mcp import Client
    from mcp.server.mcpserver import MCPServer as SdkServer
else:
    from mcp.server.fastmcp import FastMCP as SdkServer  # type: ignore[attr-defined,unused-ignore]
    from mcp.shared.memory import create_connected_server_and_client_session
if HAS_FASTMCP:
    import fastmcp

pytestmark = pytest.mark.timeout(120)

SERVER = "wrapper-check"
DRAIN_S = 30.0


def words() -> str:
    return "Quarterly revenue grew in every region; the full table follows in the report."


def answer() -> int:
    return 42


def ratio() -> float:
    return 0.875


def enabled() -> bool:
    return True


def primes() -> list[int]:
    return [2, 3, 5, 7, 11, 13]


def regions() -> list[str]:
    return ["north america", "europe", "asia pacific"]


WRAPPED_TOOLS: tuple[Callable[[], Any], ...] = (words, answer, ratio, enabled, primes, regions)


def sdk_server() -> Any:
    server = SdkServer(SERVER)
    for function in WRAPPED_TOOLS:
        server.tool()(function)
    return server


def fastmcp_server() -> Any:
    server = fastmcp.FastMCP(SERVER)
    for function in WRAPPED_TOOLS:
        server.tool()(function)
    return server


@contextlib.asynccontextmanager
async def sdk_calls(server: Any) -> AsyncIterator[Callable[[str], Any]]:
    if IS_MCP2:
        async with Client(server) as client:
            yield lambda name: client.call_tool(name, {})
    else:
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            yield lambda name: session.call_tool(name, {})


@contextlib.asynccontextmanager
async def fastmcp_calls(server: Any) -> AsyncIterator[Callable[[str], Any]]:
    async with fastmcp.Client(server) as client:
        yield lambda name: client.call_tool_mcp(name, {})


FLAVOURS = {"sdk": (sdk_server, sdk_calls), "fastmcp": (fastmcp_server, fastmcp_calls)}


@contextlib.contextmanager
def instrumented() -> Iterator[tuple[McpTokensInstrumentor, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    instrumentor = McpTokensInstrumentor()
    instrumentor.instrument(tracer_provider=TracerProvider(), meter_provider=meter_provider)
    try:
        yield instrumentor, reader
    finally:
        instrumentor.uninstrument()
        meter_provider.shutdown()


async def call_every_tool(flavour: str) -> dict[str, dict[str, Any]]:
    build, connect = FLAVOURS[flavour]
    results = {}
    async with connect(build()) as call:
        for function in WRAPPED_TOOLS:
            result = await call(function.__name__)
            results[function.__name__] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    return results


FASTMCP = pytest.mark.skipif(not HAS_FASTMCP, reason="fastmcp is not installed")


@pytest.mark.parametrize("flavour", ["sdk", pytest.param("fastmcp", marks=FASTMCP)])
def test_the_result_wrapper_is_duplicate_overhead(flavour: str) -> None:
    with instrumented() as (instrumentor, reader):
        results = anyio.run(call_every_tool, flavour)
        assert instrumentor.pipeline.force_flush(DRAIN_S)
        points = points_of(reader, semconv.OVERHEAD)
    for function in WRAPPED_TOOLS:
        result = results[function.__name__]
        # The convention under test: the value as text, and wrapped.
        assert result["structuredContent"] == {"result": json.loads(json.dumps(function()))}
        assert [block["type"] for block in result["content"]] == ["text"] * len(result["content"]) != []
    for side in (semconv.SIDE_CLIENT, semconv.SIDE_SERVER):
        duplicates = {
            attributes[semconv.GEN_AI_TOOL_NAME]: point.value
            for attributes, point in points
            if attributes[semconv.SIDE] == side and attributes[semconv.OVERHEAD_KIND] == "duplicate"
        }
        want = {name: count(compact(result["structuredContent"])) for name, result in results.items()}
        assert duplicates == want, side
