# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What the installed MCP SDK itself does on the event loop with a response it receives.

Over stdio the client's transport parses each line into a JSON-RPC message on the loop
(mcp 2.x: `mcp_types.jsonrpc_message_adapter.validate_json`; 1.x:
`JSONRPCMessage.model_validate_json`), then the session validates the result as the
request's result type (`CallToolResult`, `ListToolsResult`), on the loop too: for that long
every other task of the loop waits, whether mcp-tokens is installed or not.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_RESULT_TYPES = {"tools/call": "CallToolResult", "tools/list": "ListToolsResult"}


def response_line(result: dict[str, Any]) -> str:
    """The JSON-RPC line a server writes for `result`."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": 1, "result": result}, separators=(",", ":"), ensure_ascii=False
    )


def receiver() -> Callable[[str, str], object]:
    """`receive(line, method)`: the SDK's parsing and validation of one response line."""
    try:
        import mcp_types as types  # noqa: PLC0415 -- mcp 2.x; 1.x has no such package
    except ImportError:
        from mcp import types  # noqa: PLC0415

        def receive_v1(line: str, method: str) -> object:
            message = types.JSONRPCMessage.model_validate_json(line)
            return getattr(types, _RESULT_TYPES[method]).model_validate(message.root.result)

        return receive_v1

    def receive_v2(line: str, method: str) -> object:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return getattr(types, _RESULT_TYPES[method]).model_validate(message.result, by_name=False)

    return receive_v2
