# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Command line shared by the server modules: `--transport stdio|sse|streamable-http|stateless-http
--port N`. HTTP transports bind 127.0.0.1 only and serve under `/sse` (SSE) or `/mcp`."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import uvicorn

TRANSPORTS = ("stdio", "sse", "streamable-http", "stateless-http")
HOST = "127.0.0.1"
SSE_PATH = "/sse"
MESSAGE_PATH = "/messages/"
MCP_PATH = "/mcp"


@dataclass(frozen=True)
class ServerApp:
    """How one server flavour runs: over stdio, or as an ASGI app for an HTTP transport."""

    run_stdio: Callable[[], Awaitable[None]]
    http_app: Callable[[str], Any]  # transport name -> ASGI application


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run an mcp-tokens test server.")
    parser.add_argument("--transport", choices=TRANSPORTS, default="stdio")
    parser.add_argument("--port", type=int, default=0, help="TCP port for HTTP transports (127.0.0.1)")
    args = parser.parse_args(argv)
    if args.transport != "stdio" and not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535 for {args.transport}, got {args.port}")
    return args


async def _serve_http(app: Any, port: int) -> None:
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on", access_log=False)
    await uvicorn.Server(config).serve()


def main(build: Callable[[], ServerApp], argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    # stdout belongs to the protocol on stdio; keep library chatter on stderr and quiet.
    logging.basicConfig(level=logging.WARNING)
    server = build()
    if args.transport == "stdio":
        anyio.run(server.run_stdio)
    else:
        app = server.http_app(args.transport)
        anyio.run(_serve_http, app, args.port)
