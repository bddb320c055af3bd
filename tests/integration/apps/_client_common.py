# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Types shared by the client drivers: what to connect to, and what a call returned (wire form)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from . import payloads
from ._serve import MCP_PATH, SSE_PATH

CLIENT_TRANSPORTS = ("stdio", "sse", "streamable-http", "stateless-http", "memory")
CLIENT_KINDS = ("sdk", "fastmcp")
ERAS = ("legacy", "modern")


@dataclass(frozen=True)
class Target:
    """Where a driver connects.

    - `stdio`: the driver launches `flavour`'s module (see `harness.server_command`), with `env`
      added to this process's environment, and `python` (default: this interpreter).
    - `sse`, `streamable-http`, `stateless-http`: `base_url` of a running server (`harness.running_server`).
    - `memory`: in-process; `server` is the server object (default: built fresh from `flavour`).
    """

    flavour: str
    transport: str
    base_url: str | None = None
    env: Mapping[str, str] | None = None
    python: str | None = None
    server: Any = None

    def endpoint(self) -> str:
        if self.base_url is None:
            raise ValueError(f"transport {self.transport!r} needs base_url")
        return self.base_url + (SSE_PATH if self.transport == "sse" else MCP_PATH)


@dataclass(frozen=True)
class CallOutcome:
    """One tools/call: the CallToolResult in wire form, or the JSON-RPC error it raised."""

    tool: str
    result: dict[str, Any] | None = None
    error_code: int | None = None
    error_message: str | None = None

    @property
    def is_error_result(self) -> bool:
        return bool(self.result and self.result.get("isError"))

    @property
    def text(self) -> str | None:
        """The concatenated text blocks of the result, or None when there is none."""
        if self.result is None:
            return None
        texts = [block["text"] for block in self.result.get("content", []) if block.get("type") == "text"]
        return "".join(texts) if texts else None


@dataclass
class SessionReport:
    """Everything one standard session saw."""

    server_name: str | None
    protocol_version: str | None
    tool_names: list[str] = field(default_factory=list)
    calls: dict[str, CallOutcome] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    prompt_text: str | None = None


class Driver(Protocol):
    """A connected client, the same for every SDK line, client kind and transport."""

    server_name: str | None
    protocol_version: str | None

    async def list_tools(self) -> list[dict[str, Any]]: ...

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallOutcome: ...

    async def read_resource(self, uri: str) -> str: ...

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> str: ...


def wire(model: Any) -> dict[str, Any]:
    """A typed SDK model in its camelCase wire form."""
    dumped: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


def first_text(blocks: Any) -> str:
    """Text of the first text-bearing item of a list of content blocks or resource contents."""
    for block in blocks:
        text = getattr(block, "text", None)
        if text is None:
            text = getattr(getattr(block, "content", None), "text", None)
        if isinstance(text, str):
            return text
    return ""


def sampling_reply_text(messages: Any) -> str:
    """The deterministic answer to a sampling request: `payloads.sampling_answer` of its first text."""
    return payloads.sampling_answer(first_text(messages))
