# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Transports for a low-level `Server`, written against the API both mcp lines share
(`stdio_server`, `SseServerTransport`, `StreamableHTTPSessionManager`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from ._serve import MCP_PATH, MESSAGE_PATH, SSE_PATH


async def run_stdio(server: Any) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _ManagerEndpoint:
    """ASGI endpoint that hands every request under MCP_PATH to the session manager."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self._manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self._manager.handle_request(scope, receive, send)


def _sse_app(server: Any) -> Starlette:
    sse = SseServerTransport(MESSAGE_PATH)

    async def handle_sse(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (
            read_stream,
            write_stream,
        ):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route(SSE_PATH, endpoint=handle_sse, methods=["GET"]),
            Mount(MESSAGE_PATH, app=sse.handle_post_message),
        ]
    )


def _streamable_app(server: Any, *, stateless: bool) -> Starlette:
    manager = StreamableHTTPSessionManager(app=server, stateless=stateless)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route(MCP_PATH, endpoint=_ManagerEndpoint(manager))], lifespan=lifespan)


def http_app_for(server: Any, transport: str) -> Starlette:
    if transport == "sse":
        return _sse_app(server)
    if transport in ("streamable-http", "stateless-http"):
        return _streamable_app(server, stateless=transport == "stateless-http")
    raise ValueError(f"not an HTTP transport: {transport!r}")
