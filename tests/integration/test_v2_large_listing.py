# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A listing far past the per-label and per-block bounds (5,000 tools against 200 label values
and 1,024 detailed blocks): the tool-definition gauge of the server still adds up to the
listing's tokens, counted here with tiktoken from the wire result by docs/telemetry.md's
rule (the compact JSON of each tool's shown fields)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv

from tests.integration.apps._line import IS_MCP2
from tests.integration.v2_support import instrumented, record, select, tool_definitions

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(120),
]

if IS_MCP2:
    import mcp_types as types
    from mcp import Client
    from mcp.server import Server

TOOLS = 5_000
SERVER = "huge-catalogue"


def build_server() -> Any:
    tools = [
        types.Tool(
            name=f"catalogue_{i:04d}",
            description=f"Look up entry {i} of the catalogue by SKU and region; returns stock and price.",
            input_schema={
                "type": "object",
                "properties": {"sku": {"type": "string"}, "region": {"type": "string", "enum": ["eu", "us"]}},
                "required": ["sku"],
            },
        )
        for i in range(TOOLS)
    ]
    # One nameless entry too: hostile listings need not name their tools.
    nameless = types.Tool.model_construct(name="", input_schema={"type": "object"}, description="no name")

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[*tools, nameless])

    return Server(SERVER, on_list_tools=list_tools)


class _Driver:
    def __init__(self, client: Any) -> None:
        self.client = client


async def list_once() -> dict[str, Any]:
    async with Client(build_server()) as client:
        proxy = record(_Driver(client))
        await client.list_tools()
    (call,) = [c for c in proxy.calls if c.method == "tools/list"]
    assert isinstance(call.result, dict)  # the wire result, as the transport carried it
    return call.result


def test_the_definition_gauge_adds_up_to_the_listing_whatever_its_size() -> None:
    with instrumented() as telemetry:
        wire = anyio.run(list_once)
        points = telemetry.points(semconv.TOOL_DEFINITION)
    assert len(wire["tools"]) == TOOLS + 1
    expected = sum(tool_definitions(wire).values())
    for side in (semconv.SIDE_CLIENT, semconv.SIDE_SERVER):
        gauge = select(points, mcp_tokens__side=side, mcp_tokens__server__name=SERVER)
        assert sum(point.value for _, point in gauge) == expected, side
        labels = {attributes[semconv.GEN_AI_TOOL_NAME] for attributes, _ in gauge}
        assert semconv.OTHER_VALUE in labels and len(labels) <= 201
