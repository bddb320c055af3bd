# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A minimal MCP server over stdio, written against the wire protocol (no `mcp` import).

It serves a listing from `listings` and can misbehave on purpose, so the CLI's handling of
bad servers is tested against real processes and real pipes:

    python -m tests.cli.fixture_server --listing shop_v1 [--page-size N] [--fault NAME]

Faults: exit-at-start, crash-on-list, hang-on-list, malformed, nameless, duplicate, cursor-loop,
too-many-tools, enormous, hang-on-call. `server/discover` is answered with "method not found", as a server
of the handshake era does, so mcp 2.x clients fall back to `initialize`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import sys
import time
from typing import Any

from tests.cli import listings

FAULTS = (
    "exit-at-start",
    "crash-on-list",
    "hang-on-list",
    "malformed",
    "nameless",
    "duplicate",
    "cursor-loop",
    "too-many-tools",
    "enormous",
    "hang-on-call",
)
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
_PAGES_SERVED: list[Any] = []


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _error(request_id: Any, code: int, message: str) -> None:
    _send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _result(request_id: Any, result: dict[str, Any]) -> None:
    _send({"jsonrpc": "2.0", "id": request_id, "result": result})


def _tools(args: argparse.Namespace) -> list[dict[str, Any]]:
    tools = listings.LISTINGS[args.listing]()
    if args.fault == "too-many-tools":
        tools = [{"name": f"tool_{index}", "inputSchema": {"type": "object"}} for index in range(10_001)]
    elif args.fault == "enormous":
        tools[0]["description"] = "lorem ipsum " * ((17 << 20) // 12)
    elif args.fault == "nameless":
        tools[1].pop("name")
    elif args.fault == "duplicate":
        tools[1]["name"] = tools[0]["name"]
    return tools


def _list_tools(request_id: Any, params: dict[str, Any], args: argparse.Namespace) -> None:
    if args.fault == "crash-on-list":
        sys.stderr.write("fatal: catalog index is corrupt\n")
        sys.stderr.flush()
        sys.exit(3)
    if args.fault == "hang-on-list":
        if args.listed_file:  # the client now waits for the listing: tell the test
            pathlib.Path(args.listed_file).touch()
        time.sleep(3600)
    if args.fault == "malformed":
        _result(request_id, {"tools": {"search_products": "not a list"}})
        return
    tools = _tools(args)
    if args.fault == "cursor-loop":  # a different tool on every page, and always the same cursor
        _PAGES_SERVED.append(request_id)
        index = (len(_PAGES_SERVED) - 1) % len(tools)
        _result(request_id, {"tools": tools[index : index + 1], "nextCursor": "again"})
        return
    start = int(params.get("cursor") or 0)
    end = start + args.page_size if args.page_size else len(tools)
    page: dict[str, Any] = {"tools": tools[start:end]}
    if end < len(tools):
        page["nextCursor"] = str(end)
    _result(request_id, page)


def _call_tool(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    result = listings.call_result(str(name), params.get("arguments") or {})
    if result is None:
        _error(request_id, INVALID_PARAMS, f"Unknown tool: {name}")
    else:
        _result(request_id, result)


def _initialize(request_id: Any, args: argparse.Namespace) -> None:
    _result(
        request_id,
        {
            "protocolVersion": listings.PROTOCOL_VERSION,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": listings.SERVER_NAME, "version": args.version},
        },
    )


def serve(args: argparse.Namespace) -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if request_id is None:  # a notification
            continue
        if method == "initialize":
            _initialize(request_id, args)
        elif method == "tools/list":
            _list_tools(request_id, params, args)
        elif method == "tools/call":
            if args.fault == "hang-on-call":
                time.sleep(3600)
            _call_tool(request_id, params)
        elif method == "ping":
            _result(request_id, {})
        else:
            _error(request_id, METHOD_NOT_FOUND, f"Method not found: {method}")


def main() -> None:
    parser = argparse.ArgumentParser(description="mcp-tokens CLI test server (stdio)")
    parser.add_argument("--listing", choices=sorted(listings.LISTINGS), default="shop_v1")
    parser.add_argument("--page-size", type=int, default=0)
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--version", default="1.0.0")
    parser.add_argument("--listed-file", help="created when tools/list arrives (hang-on-list)")
    args = parser.parse_args()
    if args.fault == "exit-at-start":
        sys.stderr.write("cannot open database shop.db\n")
        sys.exit(2)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(args)


if __name__ == "__main__":
    main()
