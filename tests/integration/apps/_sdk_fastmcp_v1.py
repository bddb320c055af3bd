# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The bundled `mcp.server.fastmcp.FastMCP` on mcp 1.x."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError

from . import payloads
from ._serve import ServerApp


def _result(tool: str, **arguments: Any) -> types.CallToolResult:
    return types.CallToolResult.model_validate(payloads.tool_result_wire(tool, arguments))


def _boom_error() -> McpError:
    return McpError(types.ErrorData(code=payloads.BOOM_CODE, message=payloads.BOOM_MESSAGE))


def _raise_boom_before_tool_wrapping(server: FastMCP) -> None:
    """FastMCP 1.x's `Tool.run` turns every exception, McpError included, into an isError result,
    so a tool cannot answer with a JSON-RPC error. Raise `boom`'s from the request handler."""
    handlers = server._mcp_server.request_handlers
    inner = handlers[types.CallToolRequest]

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        if request.params.name == "boom":
            raise _boom_error()
        return await inner(request)

    handlers[types.CallToolRequest] = call_tool


def build_server() -> FastMCP:
    server = FastMCP(payloads.SERVER_NAMES["sdk_fastmcp"], log_level="WARNING")
    descriptions = {spec.name: spec.description for spec in payloads.TOOL_SPECS}

    @server.tool(description=descriptions["echo"])
    def echo(text: str) -> types.CallToolResult:
        return _result("echo", text=text)

    @server.tool(description=descriptions["sized"])
    def sized(tokens_hint: int) -> types.CallToolResult:
        return _result("sized", tokens_hint=tokens_hint)

    @server.tool(description=descriptions["records"])
    def records(n: int) -> types.CallToolResult:
        return _result("records", n=n)

    @server.tool(description=descriptions["pretty_json"])
    def pretty_json(n: int) -> types.CallToolResult:
        return _result("pretty_json", n=n)

    @server.tool(description=descriptions["structured"])
    def structured(n: int) -> types.CallToolResult:
        return _result("structured", n=n)

    @server.tool(description=descriptions["image"])
    def image() -> types.CallToolResult:
        return _result("image")

    @server.tool(description=descriptions["padded_document"])
    def padded_document() -> types.CallToolResult:
        return _result("padded_document")

    @server.tool(description=descriptions["fail"])
    def fail() -> types.CallToolResult:
        return _result("fail")

    @server.tool(description=descriptions["boom"])
    def boom() -> types.CallToolResult:
        raise _boom_error()

    @server.tool(description=descriptions["sample"])
    async def sample(prompt: str, ctx: Context[Any, Any, Any]) -> types.CallToolResult:
        messages = [
            types.SamplingMessage.model_validate(m) for m in payloads.sampling_request_messages(prompt)
        ]
        reply = await ctx.session.create_message(
            messages=messages, max_tokens=payloads.SAMPLING_MAX_TOKENS, related_request_id=ctx.request_id
        )
        answer = reply.content.text if isinstance(reply.content, types.TextContent) else ""
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"sampled: {answer}")])

    _raise_boom_before_tool_wrapping(server)

    for uri, (name, description, reader) in payloads.RESOURCES.items():
        server.resource(uri, name=name, description=description, mime_type="text/plain")(reader)

    @server.prompt(name=payloads.PROMPT_NAME, description=payloads.PROMPT_DESCRIPTION)
    def review(code: str) -> str:
        return payloads.review_prompt_text(code)

    return server


def build_app() -> ServerApp:
    def http_app(transport: str) -> Any:
        server = build_server()
        if transport == "sse":
            return server.sse_app()
        server.settings.stateless_http = transport == "stateless-http"
        return server.streamable_http_app()

    return ServerApp(run_stdio=lambda: build_server().run_stdio_async(), http_app=http_app)
