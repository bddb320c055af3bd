# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""An MCP server (the SDK's high-level server) whose tools return the payloads of a JSON file:
`{"tool name": [text block, ...]}`, read from MCP_TOKENS_E2E_PAYLOADS at start.

Run: `python -m tests.e2e.claude_server` (stdio). The test writes the file with texts made
from a seed chosen at run time, so what the server returns was never seen by any test before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from tests.integration.apps._line import IS_MCP1

SERVER_NAME = "claude-e2e"


def _tool(blocks: list[str]) -> Callable[[], Any]:
    def call() -> Any:
        if IS_MCP1:
            from mcp import types  # noqa: PLC0415
        else:
            import mcp_types as types  # noqa: PLC0415
        return types.CallToolResult(content=[types.TextContent(type="text", text=block) for block in blocks])

    return call


def build_server(payloads: dict[str, list[str]]) -> Any:
    if IS_MCP1:
        from mcp.server.fastmcp import FastMCP  # noqa: PLC0415

        server: Any = FastMCP(SERVER_NAME)
    else:
        from mcp.server.mcpserver import MCPServer  # noqa: PLC0415

        server = MCPServer(SERVER_NAME, version="1.0.0")
    for name, blocks in payloads.items():
        server.tool(name=name, description=f"Returns the {name} payload.")(_tool(blocks))
    return server


def main() -> None:
    payloads = json.loads(Path(os.environ["MCP_TOKENS_E2E_PAYLOADS"]).read_text(encoding="utf-8"))
    server = build_server(payloads)
    anyio.run(server.run_stdio_async)


if __name__ == "__main__":
    main()
