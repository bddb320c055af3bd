# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A minimal MCP client over stdio pipes, written against the wire protocol (no SDK).

It gives the tests the listing exactly as the server wrote it, by a path independent of the
CLI (which goes through the SDK), so expected token counts are computed by hand from it.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

PROTOCOL_VERSION = "2025-11-25"  # what the SDKs' legacy handshake asks for, so servers answer alike


def _send(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def _response(stream: IO[str], request_id: int) -> dict[str, Any]:
    """The result of request `request_id`; server notifications and requests are skipped."""
    for line in stream:
        if not line.strip():
            continue
        message = json.loads(line)
        if message.get("id") == request_id and "method" not in message:
            if "error" in message:
                raise RuntimeError(f"request {request_id} failed: {message['error']}")
            result: dict[str, Any] = message["result"]
            return result
    raise RuntimeError(f"the server closed stdout before answering request {request_id}")


def list_tools(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float = 60.0
) -> list[dict[str, Any]]:
    """Start the server, hand-shake, page through tools/list, stop it; tools in wire key order."""
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        encoding="utf-8",
    )
    watchdog = threading.Timer(timeout_s, process.kill)
    watchdog.start()
    assert process.stdin is not None and process.stdout is not None
    try:
        _send(
            process.stdin,
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "mcp-tokens-raw-test-client", "version": "0"},
                },
            },
        )
        _response(process.stdout, 1)
        _send(process.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for request_id in range(2, 1000):
            params = {"cursor": cursor} if cursor else {}
            _send(
                process.stdin, {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": params}
            )
            page = _response(process.stdout, request_id)
            tools.extend(page["tools"])
            cursor = page.get("nextCursor")
            if not cursor:
                return tools
        raise RuntimeError("tools/list did not end within 1000 pages")
    finally:
        watchdog.cancel()
        process.stdin.close()
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
        process.stdout.close()
