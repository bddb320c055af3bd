# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Standalone fastmcp with the shared tool set: fastmcp 3.x on mcp 1.x, fastmcp 4.x on mcp 2.x.

Run: `python -m tests.integration.apps.fastmcp_server --transport stdio|sse|streamable-http|stateless-http
--port N`.
"""

from __future__ import annotations

import warnings
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware
from fastmcp.tools.base import ToolResult

from . import _serve, payloads
from ._line import IS_MCP1

if IS_MCP1:
    from mcp import types
    from mcp.shared.exceptions import McpError

    def _protocol_error(code: int, message: str) -> Exception:
        return McpError(types.ErrorData(code=code, message=message))

    MODERN_PROTOCOL_VERSIONS: tuple[str, ...] = ()
    SamplingDeprecation: type[Warning] = DeprecationWarning
else:
    import mcp_types as types  # type: ignore[no-redef]
    from mcp.shared.exceptions import MCPDeprecationWarning as SamplingDeprecation  # type: ignore[assignment]
    from mcp.shared.exceptions import MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # type: ignore[no-redef]

    def _protocol_error(code: int, message: str) -> Exception:
        return MCPError(code, message)


SAMPLING_KEY = "sample"


class RaiseBoomAsProtocolError(Middleware):  # type: ignore[misc]
    """fastmcp masks every exception a tool raises, McpError/MCPError included, into an isError
    result. On fastmcp 4, raised from middleware (outside `Tool._run`), it reaches the wire as a
    JSON-RPC error; fastmcp 3 registers through mcp 1.x's `@call_tool()` decorator, which masks
    middleware errors too, so there `_raise_boom_from_request_handler` does it."""

    async def on_call_tool(self, context: Any, call_next: Any) -> Any:
        if context.message.name == "boom":
            raise _protocol_error(payloads.BOOM_CODE, payloads.BOOM_MESSAGE)
        return await call_next(context)


def _result(tool: str, **arguments: Any) -> ToolResult:
    wire = payloads.tool_result_wire(tool, arguments)
    content = [
        types.CallToolResult.model_validate({"content": [block]}).content[0] for block in wire["content"]
    ]
    return ToolResult(content=content, structured_content=wire.get("structuredContent"))


def _text_result(text: str) -> ToolResult:
    return ToolResult(content=[types.TextContent(type="text", text=text)])


def _sampling_messages(prompt: str) -> list[Any]:
    return [types.SamplingMessage.model_validate(m) for m in payloads.sampling_request_messages(prompt)]


def _answer_text(reply: Any) -> str:
    content = getattr(reply, "content", None)
    return content.text if isinstance(content, types.TextContent) else ""


async def sample(prompt: str, ctx: Context) -> Any:
    request_context = ctx.request_context
    version = getattr(request_context, "protocol_version", None)  # absent on fastmcp 3 / mcp 1.x
    modern = version in MODERN_PROTOCOL_VERSIONS
    if modern:
        # fastmcp 4 on 2026-07-28: no back-channel; the guard pattern asks inside the result.
        answer = (ctx.input_responses or {}).get(SAMPLING_KEY)
        if answer is None:
            request = types.CreateMessageRequest(
                params=types.CreateMessageRequestParams(
                    messages=_sampling_messages(prompt), max_tokens=payloads.SAMPLING_MAX_TOKENS
                )
            )
            return types.InputRequiredResult(input_requests={SAMPLING_KEY: request})
        return _text_result(f"sampled: {_answer_text(answer)}")
    with warnings.catch_warnings():
        # Deprecated on mcp 2.x for 2026-07-28; the handshake era still uses it.
        warnings.simplefilter("ignore", SamplingDeprecation)
        pending = ctx.session.create_message(
            messages=_sampling_messages(prompt),
            max_tokens=payloads.SAMPLING_MAX_TOKENS,
            related_request_id=ctx.request_id,
        )
    return _text_result(f"sampled: {_answer_text(await pending)}")


def _raise_boom_from_request_handler(server: FastMCP) -> None:
    handlers = server._mcp_server.request_handlers
    inner = handlers[types.CallToolRequest]

    async def call_tool(request: Any) -> Any:
        if request.params.name == "boom":
            raise _protocol_error(payloads.BOOM_CODE, payloads.BOOM_MESSAGE)
        return await inner(request)

    handlers[types.CallToolRequest] = call_tool


def build_server() -> FastMCP:
    server = FastMCP(
        payloads.SERVER_NAMES["fastmcp"],
        version=payloads.SERVER_VERSION,
        middleware=[RaiseBoomAsProtocolError()],
    )
    descriptions = {spec.name: spec.description for spec in payloads.TOOL_SPECS}

    def register(fn: Any) -> None:
        server.tool(description=descriptions[fn.__name__])(fn)

    def echo(text: str) -> ToolResult:
        return _result("echo", text=text)

    def sized(tokens_hint: int) -> ToolResult:
        return _result("sized", tokens_hint=tokens_hint)

    def records(n: int) -> ToolResult:
        return _result("records", n=n)

    def pretty_json(n: int) -> ToolResult:
        return _result("pretty_json", n=n)

    def structured(n: int) -> ToolResult:
        return _result("structured", n=n)

    def image() -> ToolResult:
        return _result("image")

    def padded_document() -> ToolResult:
        return _result("padded_document")

    def fail() -> ToolResult:
        raise ToolError(payloads.FAIL_MESSAGE)

    def boom() -> ToolResult:
        raise _protocol_error(payloads.BOOM_CODE, payloads.BOOM_MESSAGE)

    for fn in (echo, sized, records, pretty_json, structured, image, padded_document, fail, boom, sample):
        register(fn)

    for uri, (name, description, reader) in payloads.RESOURCES.items():
        server.resource(uri, name=name, description=description, mime_type="text/plain")(reader)

    @server.prompt(name=payloads.PROMPT_NAME, description=payloads.PROMPT_DESCRIPTION)
    def review(code: str) -> str:
        return payloads.review_prompt_text(code)

    if IS_MCP1:
        _raise_boom_from_request_handler(server)
    return server


def build_app() -> _serve.ServerApp:
    def http_app(transport: str) -> Any:
        server = build_server()
        if transport == "sse":
            return server.http_app(transport="sse", path=_serve.SSE_PATH)
        return server.http_app(
            transport="streamable-http", path=_serve.MCP_PATH, stateless_http=transport == "stateless-http"
        )

    return _serve.ServerApp(run_stdio=lambda: build_server().run_stdio_async(), http_app=http_app)


if __name__ == "__main__":
    _serve.main(build_app)
