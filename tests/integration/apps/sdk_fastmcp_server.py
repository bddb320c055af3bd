# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The SDK's own high-level server with the shared tool set: `mcp.server.fastmcp.FastMCP` on mcp 1.x,
`mcp.server.mcpserver.MCPServer` on mcp 2.x.

Run: `python -m tests.integration.apps.sdk_fastmcp_server --transport stdio|sse|streamable-http|stateless-http
--port N`.
"""

from __future__ import annotations

from . import _serve
from ._line import IS_MCP1

# `build_server()`: a fresh server for in-process use; `build_app()`: how it runs over each transport.
if IS_MCP1:
    from ._sdk_fastmcp_v1 import build_app, build_server
else:
    from ._sdk_fastmcp_v2 import build_app, build_server

__all__ = ["build_app", "build_server"]

if __name__ == "__main__":
    _serve.main(build_app)
