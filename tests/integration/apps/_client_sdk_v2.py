# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Client driver on mcp 2.x: `mcp.Client` over each transport.

`era="legacy"` forces the `initialize` handshake (`mode="legacy"`); `era="modern"` is the 2.x
default (`mode="auto"`): `server/discover`, then 2026-07-28 per-request envelopes. In memory,
legacy runs the stream loop (`InMemoryTransport`), modern the `DirectDispatcher` (no JSON-RPC).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.shared.exceptions import MCPError

from . import harness, payloads
from ._client_common import CallOutcome, Target, first_text, sampling_reply_text, wire

READ_TIMEOUT_S = 30.0


async def answer_sampling(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=sampling_reply_text(params.messages)),
        model=payloads.SAMPLING_MODEL,
    )


class SdkDriver:
    def __init__(self, client: Client) -> None:
        self.client = client
        info = client.server_info
        self.server_name: str | None = info.name if info is not None else None
        self.protocol_version: str | None = client.protocol_version

    async def list_tools(self) -> list[dict[str, Any]]:
        return [wire(tool) for tool in (await self.client.list_tools()).tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        try:
            result = await self.client.call_tool(name, arguments)
        except MCPError as exc:
            return CallOutcome(name, error_code=exc.code, error_message=exc.message)
        return CallOutcome(name, result=wire(result))

    async def read_resource(self, uri: str) -> str:
        return first_text((await self.client.read_resource(uri)).contents)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        return first_text((await self.client.get_prompt(name, arguments)).messages)


def _client_server_argument(target: Target) -> Any:
    if target.transport == "stdio":
        argv = harness.server_command(target.flavour, "stdio", python=target.python)
        return StdioServerParameters(
            command=argv[0], args=argv[1:], env=harness.subprocess_env(target.env), cwd=str(harness.REPO_ROOT)
        )
    if target.transport == "sse":
        return sse_client(target.endpoint())
    if target.transport in ("streamable-http", "stateless-http"):
        return target.endpoint()
    if target.transport == "memory":
        # fastmcp 4 servers are not `Server`s; their low-level server is.
        return getattr(target.server, "_mcp_server", target.server)
    raise ValueError(f"unknown transport {target.transport!r}")


@contextlib.asynccontextmanager
async def connect(target: Target, era: str = "legacy") -> AsyncIterator[SdkDriver]:
    mode = "legacy" if era == "legacy" else "auto"
    client = Client(
        _client_server_argument(target),
        mode=mode,
        sampling_callback=answer_sampling,
        read_timeout_seconds=READ_TIMEOUT_S,
    )
    async with client:
        yield SdkDriver(client)
