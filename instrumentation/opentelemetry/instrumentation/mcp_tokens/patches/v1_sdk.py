# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The mcp 1.x classes the 1.x patches use, loaded at patch time.

Loaded by name rather than imported at module level: the package type-checks and imports
on mcp 2.x too (where `mcp.shared.session` does not exist), and a 1.x release that moved
one of them fails here, in `patch()`, with the missing name, before anything is patched.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SdkV1:
    BaseSession: Any
    ClientSession: Any
    ServerSession: Any
    RequestResponder: Any
    Server: Any
    McpError: Any
    ErrorData: Any
    JSONRPCResponse: Any
    InitializeRequest: Any
    RequestParams: Any
    stdio_client_module: Any
    sse_client_module: Any
    streamable_http_client_module: Any
    stdio_server_module: Any
    sse_server_module: Any
    streamable_http_server_module: Any


_CLASSES = {
    "BaseSession": ("mcp.shared.session", "BaseSession"),
    "RequestResponder": ("mcp.shared.session", "RequestResponder"),
    "ClientSession": ("mcp.client.session", "ClientSession"),
    "ServerSession": ("mcp.server.session", "ServerSession"),
    "Server": ("mcp.server.lowlevel.server", "Server"),
    "McpError": ("mcp.shared.exceptions", "McpError"),
    "ErrorData": ("mcp.types", "ErrorData"),
    "JSONRPCResponse": ("mcp.types", "JSONRPCResponse"),
    "InitializeRequest": ("mcp.types", "InitializeRequest"),
    "RequestParams": ("mcp.types", "RequestParams"),
}
_MODULES = {
    "stdio_client_module": "mcp.client.stdio",
    "sse_client_module": "mcp.client.sse",
    "streamable_http_client_module": "mcp.client.streamable_http",
    "stdio_server_module": "mcp.server.stdio",
    "sse_server_module": "mcp.server.sse",
    "streamable_http_server_module": "mcp.server.streamable_http",
}


def load_sdk() -> SdkV1:
    """Import the 1.x names; raises ImportError or AttributeError naming what is missing."""
    values: dict[str, Any] = {}
    for field_name, (module_name, attribute) in _CLASSES.items():
        module = importlib.import_module(module_name)
        if not hasattr(module, attribute):
            raise AttributeError(f"mcp 1.x layout changed: {module_name}.{attribute} is missing")
        values[field_name] = getattr(module, attribute)
    for field_name, module_name in _MODULES.items():
        values[field_name] = importlib.import_module(module_name)
    return SdkV1(**values)
