# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A minimal MCP client over streamable HTTP (handshake era), on `http.client`.

The SDK clients cost ~50 ms of CPU per session, which on two cores would make a load test
measure the client; this one speaks the same wire protocol (POST JSON-RPC, responses as JSON
or an SSE stream, the `mcp-session-id` header, DELETE to end the session) for a fraction of
that, so the server under test is what is measured.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

from examples.processes import HOST

PROTOCOL_VERSION = "2025-06-18"


class McpHttpError(RuntimeError):
    pass


class RawSession:
    def __init__(self, port: int, path: str = "/mcp", timeout_s: float = 30.0) -> None:
        self._connection = http.client.HTTPConnection(HOST, port, timeout=timeout_s)
        self._path = path
        self._next_id = 0
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.server_info: dict[str, Any] = {}
        self.last_headers: dict[str, str] = {}  # the last HTTP response's, names lower-cased

    def initialize(self) -> None:
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "mcp-tokens-load", "version": "1.0"},
            },
        )
        self.protocol_version = str(result["protocolVersion"])
        self.server_info = dict(result.get("serverInfo", {}))
        self.notify("notifications/initialized")

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        _, content_type, body = self._send("POST", message)
        answer = _find_response(content_type, body, self._next_id)
        if "error" in answer:
            raise McpHttpError(f"{method}: JSON-RPC error {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    def notify(self, method: str) -> None:
        self._send("POST", {"jsonrpc": "2.0", "method": method})

    def close(self) -> None:
        try:
            if self.session_id is not None:
                self._send("DELETE", None)
        finally:
            self._connection.close()

    def _send(self, verb: str, message: dict[str, Any] | None) -> tuple[int, str, bytes]:
        headers = {"Accept": "application/json, text/event-stream"}
        if message is not None:
            headers["Content-Type"] = "application/json"
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        body = None if message is None else json.dumps(message).encode()
        self._connection.request(verb, self._path, body=body, headers=headers)
        response = self._connection.getresponse()
        data = response.read()
        if response.status >= 400:
            raise McpHttpError(f"{verb} {self._path}: HTTP {response.status}: {data[:300]!r}")
        self.last_headers = {name.lower(): value for name, value in response.getheaders()}
        self.session_id = response.getheader("mcp-session-id") or self.session_id
        return response.status, response.getheader("content-type", ""), data


def _find_response(content_type: str, body: bytes, request_id: int) -> dict[str, Any]:
    if content_type.startswith("text/event-stream"):
        messages = [json.loads(data) for data in _sse_data(body.decode("utf-8"))]
    else:
        loaded = json.loads(body)
        messages = loaded if isinstance(loaded, list) else [loaded]
    for message in messages:
        if isinstance(message, dict) and message.get("id") == request_id:
            return message
    raise McpHttpError(f"no response with id {request_id} in {body[:300]!r}")


def _sse_data(text: str) -> list[str]:
    """The `data` of every event in an SSE stream (multi-line data joined with newlines)."""
    events: list[str] = []
    lines: list[str] = []
    for line in text.splitlines():
        if not line:
            if lines:
                events.append("\n".join(lines))
                lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
    if lines:
        events.append("\n".join(lines))
    return events
