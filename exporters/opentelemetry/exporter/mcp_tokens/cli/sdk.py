# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The MCP Python SDK behind one interface, for mcp 1.x and 2.x alike.

What differs between the lines: the request models (`mcp.types` vs `mcp_types`), the
handshake (1.x: `initialize`; 2.x: `server/discover` with fallback, or `initialize` in
legacy mode), where the server's identity is kept, and the error type (`McpError` with
`.error` vs `MCPError` with `.code`/`.message`). Transports and `ClientSession` take the
same arguments on both. Modules are imported lazily: importing the CLI costs nothing
when the SDK is absent, and the version-specific attributes stay `Any` to the type checker.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import AsyncIterator
from functools import cache
from importlib.metadata import PackageNotFoundError, version
from typing import IO, Any

from .errors import CliError, ExitCode

CONNECTION_CLOSED = -32000
_ONE_LINE_CHARS = 300


@cache
def sdk_version() -> str | None:
    try:
        return version("mcp")
    except PackageNotFoundError:
        return None


def major() -> int:
    installed = sdk_version()
    try:
        return int((installed or "0").split(".")[0])
    except ValueError:
        return 0


def require() -> None:
    """Fail with a clear message when no supported SDK is installed."""
    if major() not in (1, 2):
        found = f"mcp {sdk_version()} is installed" if sdk_version() else "it is not installed"
        raise CliError(
            ExitCode.USAGE,
            f"connecting to a server needs the MCP Python SDK 1.x or 2.x ({found}): pip install mcp",
        )


def client_description() -> str:
    return f"mcp {sdk_version()}"


def _types() -> Any:
    return importlib.import_module("mcp_types" if major() >= 2 else "mcp.types")


@cache
def _raw_result_type() -> Any:
    """A pydantic model that keeps a JSON-RPC result as the dict the server sent."""
    from pydantic import RootModel  # noqa: PLC0415 -- pydantic comes with the optional MCP SDK

    class RawResult(RootModel[dict[str, Any]]):
        pass

    return RawResult


@contextlib.asynccontextmanager
async def stdio_streams(command: tuple[str, ...], errlog: IO[str] | None) -> AsyncIterator[tuple[Any, Any]]:
    mcp = importlib.import_module("mcp")
    stdio = importlib.import_module("mcp.client.stdio")
    # The server inherits the whole environment, as it would when the user runs it; the
    # SDK's default passes only a handful of variables.
    params = mcp.StdioServerParameters(command=command[0], args=list(command[1:]), env=dict(os.environ))
    async with stdio.stdio_client(params, errlog=errlog) as streams:
        yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def streamable_http_streams(url: str, headers: dict[str, str]) -> AsyncIterator[tuple[Any, Any]]:
    module = importlib.import_module("mcp.client.streamable_http")
    client = getattr(module, "streamable_http_client", None)
    if client is None:  # mcp 1.x before the rename
        async with module.streamablehttp_client(url, headers=headers or None) as streams:
            yield streams[0], streams[1]
        return
    http_utils = importlib.import_module("mcp.shared._httpx_utils")
    async with (
        http_utils.create_mcp_http_client(headers=headers or None) as http,
        client(url, http_client=http) as streams,
    ):
        yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def sse_streams(url: str, headers: dict[str, str]) -> AsyncIterator[tuple[Any, Any]]:
    sse = importlib.import_module("mcp.client.sse")
    async with sse.sse_client(url, headers=headers or None) as streams:
        yield streams[0], streams[1]


@contextlib.asynccontextmanager
async def session(read_stream: Any, write_stream: Any) -> AsyncIterator[Any]:
    mcp = importlib.import_module("mcp")
    async with mcp.ClientSession(read_stream, write_stream) as client_session:
        yield client_session


async def handshake(client_session: Any, protocol: str) -> tuple[str | None, str | None, str | None]:
    """Negotiate the protocol; returns the server's (name, version, protocol version)."""
    if major() >= 2:
        if protocol == "legacy":
            await client_session.initialize()
        else:
            probe = importlib.import_module("mcp.client._probe")
            await probe.negotiate_auto(client_session)
        info = client_session.server_info
        negotiated = client_session.protocol_version
    else:
        result = await client_session.initialize()
        info = result.serverInfo
        negotiated = result.protocolVersion
    name = getattr(info, "name", None)
    server_version = getattr(info, "version", None)
    return (
        name if isinstance(name, str) else None,
        server_version if isinstance(server_version, str) else None,
        str(negotiated) if negotiated is not None else None,
    )


async def list_tools_raw(client_session: Any, cursor: str | None) -> object:
    types = _types()
    params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    request = types.ListToolsRequest(method="tools/list", params=params)
    return (await client_session.send_request(request, _raw_result_type())).root


async def call_tool_raw(client_session: Any, name: str, arguments: dict[str, Any]) -> object:
    types = _types()
    params = types.CallToolRequestParams(name=name, arguments=arguments)
    request = types.CallToolRequest(method="tools/call", params=params)
    return (await client_session.send_request(request, _raw_result_type())).root


def _error_code_and_message(exc: BaseException) -> tuple[object, object]:
    error = getattr(exc, "error", None)  # 1.x McpError keeps an ErrorData
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if error is not None:
        code = getattr(error, "code", code)
        message = getattr(error, "message", message)
    return code, message


def is_mcp_error(exc: BaseException) -> bool:
    return type(exc).__name__ in ("McpError", "MCPError")


def is_connection_closed(exc: BaseException) -> bool:
    if not is_mcp_error(exc):
        return False
    code, message = _error_code_and_message(exc)
    return code == CONNECTION_CLOSED and str(message).lower().startswith("connection closed")


def is_validation_error(exc: BaseException) -> bool:
    return type(exc).__name__ == "ValidationError" and hasattr(exc, "errors")


def is_http_error(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore")


def describe_error(exc: BaseException) -> str:
    """One line saying what went wrong, for errors of the SDK, pydantic, httpx and the OS."""
    if is_mcp_error(exc):
        code, message = _error_code_and_message(exc)
        text = f"JSON-RPC error {code}: {message}" if isinstance(code, int) and code else str(message)
    elif is_validation_error(exc):
        text = _describe_validation(exc)
    elif is_http_error(exc):
        text = f"cannot reach the server ({type(exc).__name__}: {exc})"
    elif isinstance(exc, TimeoutError):
        text = "timed out"
    else:
        text = f"{type(exc).__name__}: {exc}"
    return _one_line(text)


def _describe_validation(exc: BaseException) -> str:
    try:
        errors = exc.errors()  # type: ignore[attr-defined]
        first = errors[0]
        location = ".".join(str(part) for part in first.get("loc", ())) or "result"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"{location}: {first.get('msg', 'invalid')}{more}"
    except Exception:  # a validation error we cannot take apart still gets one line
        return str(exc)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= _ONE_LINE_CHARS else line[: _ONE_LINE_CHARS - 1] + "…"
