# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Client driver with standalone fastmcp's `Client` (3.x on mcp 1.x, 4.x on mcp 2.x).

fastmcp's client drives the SDK's `ClientSession` underneath, so SDK-level hooks see its traffic.
On fastmcp 4, `era` maps to its `mode` (`legacy` or the default `auto`); fastmcp 3 is handshake-only.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import FastMCPTransport, SSETransport, StdioTransport, StreamableHttpTransport

from . import harness
from ._client_common import CallOutcome, Target, first_text, sampling_reply_text, wire
from ._line import IS_MCP1

if IS_MCP1:
    from mcp.shared.exceptions import McpError as ProtocolError
else:
    from mcp.shared.exceptions import MCPError as ProtocolError  # type: ignore[assignment]

TIMEOUT_S = 30.0


async def answer_sampling(messages: Any, params: Any, context: Any) -> str:
    return sampling_reply_text(messages)


def _transport(target: Target) -> Any:
    if target.transport == "stdio":
        argv = harness.server_command(target.flavour, "stdio", python=target.python)
        return StdioTransport(
            command=argv[0], args=argv[1:], env=harness.subprocess_env(target.env), cwd=str(harness.REPO_ROOT)
        )
    if target.transport == "sse":
        return SSETransport(target.endpoint())
    if target.transport in ("streamable-http", "stateless-http"):
        return StreamableHttpTransport(target.endpoint())
    if target.transport == "memory":
        if target.flavour != "fastmcp":
            raise ValueError("fastmcp's in-memory transport needs a fastmcp server (flavour 'fastmcp')")
        return FastMCPTransport(target.server)
    raise ValueError(f"unknown transport {target.transport!r}")


class FastMCPDriver:
    def __init__(self, client: Any) -> None:
        self.client = client
        info = getattr(client, "server_info", None)  # fastmcp 4
        if info is None and client.initialize_result is not None:
            info = client.initialize_result.serverInfo
        self.server_name: str | None = None if info is None else info.name
        version = getattr(client, "protocol_version", None)
        if version is None and client.initialize_result is not None:
            version = client.initialize_result.protocolVersion
        self.protocol_version: str | None = None if version is None else str(version)

    async def list_tools(self) -> list[dict[str, Any]]:
        return [wire(tool) for tool in await self.client.list_tools()]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        try:
            result = await self.client.call_tool_mcp(name, arguments)
        except ProtocolError as exc:
            return CallOutcome(name, error_code=exc.error.code, error_message=exc.error.message)
        return CallOutcome(name, result=wire(result))

    async def read_resource(self, uri: str) -> str:
        return first_text(await self.client.read_resource(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        return first_text((await self.client.get_prompt(name, arguments)).messages)


@contextlib.asynccontextmanager
async def connect(target: Target, era: str = "legacy") -> AsyncIterator[FastMCPDriver]:
    options: dict[str, Any] = {"sampling_handler": answer_sampling, "timeout": TIMEOUT_S}
    if not IS_MCP1:
        options["mode"] = "legacy" if era == "legacy" else "auto"
    async with Client(_transport(target), **options) as client:
        yield FastMCPDriver(client)
