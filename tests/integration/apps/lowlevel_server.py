"""The SDK's low-level `Server` with the shared tool set, on mcp 1.x or 2.x.

Run: `python -m tests.integration.apps.lowlevel_server --transport stdio|sse|streamable-http|stateless-http
--port N`.
"""

from __future__ import annotations

from typing import Any

from . import _serve
from ._line import IS_MCP1


def build_server() -> Any:
    """A fresh `Server` for in-process use."""
    if IS_MCP1:
        from ._lowlevel_v1 import build_server as build
    else:
        from ._lowlevel_v2 import build_server as build
    return build()


def build_app() -> _serve.ServerApp:
    if IS_MCP1:
        from ._lowlevel_v1 import build_app as build
    else:
        from ._lowlevel_v2 import build_app as build
    return build()


if __name__ == "__main__":
    _serve.main(build_app)
