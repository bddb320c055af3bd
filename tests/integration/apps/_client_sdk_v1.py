# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Client driver on mcp 1.x: a `ClientSession` over each transport, handshake with `initialize`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.memory import create_client_server_memory_streams
from pydantic import AnyUrl

from . import harness, payloads
from ._client_common import CallOutcome, Target, first_text, sampling_reply_text, wire

try:  # renamed in 1.2x; the old name is the only one on older 1.x
    from mcp.client.streamable_http import streamable_http_client as _streamable_http_client
except ImportError:  # pragma: no cover - depends on the installed 1.x
    from mcp.client.streamable_http import streamablehttp_client as _streamable_http_client


async def answer_sampling(
    context: Any, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=sampling_reply_text(params.messages)),
        model=payloads.SAMPLING_MODEL,
    )


class SdkDriver:
    def __init__(self, session: ClientSession, init: types.InitializeResult) -> None:
        self.session = session
        self.server_name: str | None = init.serverInfo.name
        self.protocol_version: str | None = str(init.protocolVersion)

    async def list_tools(self) -> list[dict[str, Any]]:
        return [wire(tool) for tool in (await self.session.list_tools()).tools]

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallOutcome:
        try:
            result = await self.session.call_tool(name, arguments)
        except McpError as exc:
            return CallOutcome(name, error_code=exc.error.code, error_message=exc.error.message)
        return CallOutcome(name, result=wire(result))

    async def read_resource(self, uri: str) -> str:
        return first_text((await self.session.read_resource(AnyUrl(uri))).contents)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str:
        return first_text((await self.session.get_prompt(name, arguments)).messages)


@contextlib.asynccontextmanager
async def _streams(target: Target) -> AsyncIterator[tuple[Any, Any]]:
    if target.transport == "stdio":
        argv = harness.server_command(target.flavour, "stdio", python=target.python)
        params = StdioServerParameters(
            command=argv[0], args=argv[1:], env=harness.subprocess_env(target.env), cwd=str(harness.REPO_ROOT)
        )
        async with stdio_client(params) as streams:
            yield streams
    elif target.transport == "sse":
        async with sse_client(target.endpoint()) as streams:
            yield streams
    elif target.transport in ("streamable-http", "stateless-http"):
        async with _streamable_http_client(target.endpoint()) as (read_stream, write_stream, _session_id):
            yield read_stream, write_stream
    else:
        raise ValueError(f"no 1.x stream transport {target.transport!r}")


@contextlib.asynccontextmanager
async def _memory_streams(target: Target) -> AsyncIterator[tuple[Any, Any]]:
    """Client streams wired to `target.server` run in this process (one `initialize`, unlike
    `create_connected_server_and_client_session`, which performs its own)."""
    lowlevel = getattr(target.server, "_mcp_server", target.server)
    async with (
        create_client_server_memory_streams() as (client_streams, server_streams),
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(
            lambda: lowlevel.run(
                server_streams[0],
                server_streams[1],
                lowlevel.create_initialization_options(),
                raise_exceptions=False,
            )
        )
        try:
            yield client_streams
        finally:
            tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def connect(target: Target) -> AsyncIterator[SdkDriver]:
    streams = _memory_streams(target) if target.transport == "memory" else _streams(target)
    async with contextlib.AsyncExitStack() as stack:
        read_stream, write_stream = await stack.enter_async_context(streams)
        session = await stack.enter_async_context(
            ClientSession(read_stream, write_stream, sampling_callback=answer_sampling)
        )
        yield SdkDriver(session, await session.initialize())
