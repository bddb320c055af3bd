# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The demo MCP server: eight tools, one resource and one prompt over streamable HTTP or stdio.

    python -m examples.demo_server --port 8765      # http://127.0.0.1:8765/mcp
    python -m examples.demo_server --stdio          # as a desktop host runs it

It knows nothing about mcp-tokens: run it under `opentelemetry-instrument` to get token
telemetry. On mcp 2.x it is the SDK's `MCPServer`, on mcp 1.x the bundled `FastMCP`; both
expose the same tools (see `demo_content`), which return every shape the instrumentation
tells apart: the four risk tiers, pretty-printed JSON, structuredContent that duplicates the
text, an image and a padded document.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
from collections.abc import Sequence
from typing import Any

import uvicorn
from mcp import types

from . import demo_content as content

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])
if MCP_MAJOR >= 2:
    from mcp.server.mcpserver import MCPServer
else:
    from mcp.server.fastmcp import FastMCP  # type: ignore[attr-defined,unused-ignore]

HOST = "127.0.0.1"
MCP_PATH = "/mcp"


def _result(name: str, **arguments: Any) -> types.CallToolResult:
    return types.CallToolResult.model_validate(content.tool_result(name, arguments))


# One typed function per tool: the SDKs derive each tool's inputSchema from the signature.
def customer_lookup(customer_id: int) -> types.CallToolResult:
    return _result("customer_lookup", customer_id=customer_id)


def search_orders(query: str, limit: int = 50) -> types.CallToolResult:
    return _result("search_orders", query=query, limit=limit)


def quarterly_report(quarter: str) -> types.CallToolResult:
    return _result("quarterly_report", quarter=quarter)


def export_audit_log(days: int) -> types.CallToolResult:
    return _result("export_audit_log", days=days)


def inventory_pretty(warehouse: str) -> types.CallToolResult:
    return _result("inventory_pretty", warehouse=warehouse)


def shipment_status(order_id: int) -> types.CallToolResult:
    return _result("shipment_status", order_id=order_id)


def render_chart(width: int = 480, height: int = 320) -> types.CallToolResult:
    return _result("render_chart", width=width, height=height)


def policy_document() -> types.CallToolResult:
    return _result("policy_document")


def handbook() -> str:
    return content.handbook()


def summarize_orders(region: str) -> str:
    return content.summarize_prompt(region)


_FUNCTIONS = (
    customer_lookup,
    search_orders,
    quarterly_report,
    export_audit_log,
    inventory_pretty,
    shipment_status,
    render_chart,
    policy_document,
)


def build_server() -> Any:
    """MCPServer on mcp 2.x, the bundled FastMCP on 1.x, with every demo tool registered."""
    if MCP_MAJOR >= 2:
        server: Any = MCPServer(content.SERVER_NAME, version=content.SERVER_VERSION, log_level="WARNING")
    else:
        server = FastMCP(content.SERVER_NAME, log_level="WARNING")
    for function in _FUNCTIONS:
        server.tool(description=content.TOOLS_BY_NAME[function.__name__].description)(function)
    server.resource(
        content.HANDBOOK_URI, name="handbook", description="The support handbook.", mime_type="text/markdown"
    )(handbook)
    server.prompt(name=content.PROMPT_NAME, description="Summarize a region's open orders.")(summarize_orders)
    return server


def build_app(stateless: bool = False) -> Any:
    """The streamable-HTTP ASGI app, served at `/mcp`."""
    return http_app(build_server(), stateless)


def http_app(server: Any, stateless: bool) -> Any:
    """`server`'s streamable-HTTP ASGI app (stateless: any process of a server can answer any
    request, as the workers of a multi-worker server must)."""
    if MCP_MAJOR >= 2:
        return server.streamable_http_app(stateless_http=stateless)
    server.settings.stateless_http = stateless
    return server.streamable_http_app()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run the mcp-tokens demo MCP server on 127.0.0.1.")
    parser.add_argument("--port", type=int, help="TCP port of the MCP endpoint")
    parser.add_argument("--stateless", action="store_true", help="stateless streamable HTTP")
    parser.add_argument("--stdio", action="store_true", help="serve on stdin and stdout instead")
    args = parser.parse_args(argv)
    if args.stdio:
        return args
    if args.port is None or not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535, got {args.port}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.stdio:
        build_server().run("stdio")
        return
    app = build_app(stateless=args.stateless)
    # uvicorn turns SIGTERM into a clean shutdown, so atexit hooks (the OpenTelemetry SDK's
    # final export) still run when the demo stops this process.
    uvicorn.run(app, host=HOST, port=args.port, log_level="warning", access_log=False, lifespan="on")


if __name__ == "__main__":
    main()
