# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The low-level server on mcp 1.x: `mcp.server.lowlevel.Server` with hand-written handlers."""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from . import payloads
from ._lowlevel_transports import http_app_for, run_stdio
from ._serve import ServerApp


def build_server() -> Server[Any, Any]:
    server: Server[Any, Any] = Server(payloads.SERVER_NAMES["lowlevel"], version=payloads.SERVER_VERSION)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=spec.name, description=spec.description, inputSchema=spec.input_schema)
            for spec in payloads.TOOL_SPECS
        ]

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        # Registered by hand rather than with @server.call_tool(): the decorator turns every
        # exception, McpError included, into an isError result, and `boom` must reach the wire
        # as a JSON-RPC error.
        name = request.params.name
        arguments = request.params.arguments or {}
        if name == "boom":
            raise McpError(types.ErrorData(code=payloads.BOOM_CODE, message=payloads.BOOM_MESSAGE))
        if name == "sample":
            text = await _sample(server, arguments["prompt"])
            return types.ServerResult(
                types.CallToolResult(content=[types.TextContent(type="text", text=text)])
            )
        return types.ServerResult(
            types.CallToolResult.model_validate(payloads.tool_result_wire(name, arguments))
        )

    server.request_handlers[types.CallToolRequest] = call_tool

    @server.list_resources()
    async def list_resources() -> list[types.Resource]:
        return [
            types.Resource(uri=AnyUrl(uri), name=name, description=description, mimeType="text/plain")
            for uri, (name, description, _) in payloads.RESOURCES.items()
        ]

    @server.read_resource()
    async def read_resource(uri: AnyUrl) -> list[ReadResourceContents]:
        return [ReadResourceContents(content=payloads.resource_text(str(uri)), mime_type="text/plain")]

    @server.list_prompts()
    async def list_prompts() -> list[types.Prompt]:
        return [
            types.Prompt(
                name=payloads.PROMPT_NAME,
                description=payloads.PROMPT_DESCRIPTION,
                arguments=[types.PromptArgument(name="code", required=True)],
            )
        ]

    @server.get_prompt()
    async def get_prompt(name: str, arguments: dict[str, str] | None) -> types.GetPromptResult:
        if name != payloads.PROMPT_NAME:
            raise McpError(types.ErrorData(code=types.INVALID_PARAMS, message=f"unknown prompt {name!r}"))
        return types.GetPromptResult.model_validate(payloads.prompt_wire((arguments or {})["code"]))

    return server


async def _sample(server: Server[Any, Any], prompt: str) -> str:
    context = server.request_context
    messages = [types.SamplingMessage.model_validate(m) for m in payloads.sampling_request_messages(prompt)]
    result = await context.session.create_message(
        messages=messages, max_tokens=payloads.SAMPLING_MAX_TOKENS, related_request_id=context.request_id
    )
    content = result.content
    answer = content.text if isinstance(content, types.TextContent) else ""
    return f"sampled: {answer}"


def build_app() -> ServerApp:
    server = build_server()
    return ServerApp(
        run_stdio=lambda: run_stdio(server), http_app=lambda transport: http_app_for(server, transport)
    )
