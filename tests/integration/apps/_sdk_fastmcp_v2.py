# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The SDK's `mcp.server.mcpserver.MCPServer` on mcp 2.x (the successor of the bundled FastMCP)."""

from __future__ import annotations

from typing import Annotated, Any

import mcp_types as types
from mcp.server.mcpserver import MCPServer, Resolve, Sample
from mcp.shared.exceptions import MCPError

from . import payloads
from ._serve import ServerApp


def _result(tool: str, **arguments: Any) -> types.CallToolResult:
    return types.CallToolResult.model_validate(payloads.tool_result_wire(tool, arguments))


def ask_client_model(prompt: str) -> Sample:
    """Resolver for `sample`: the framework sends it as sampling/createMessage on handshake-era
    connections and inside an InputRequiredResult on 2026-07-28 ones."""
    messages = [types.SamplingMessage.model_validate(m) for m in payloads.sampling_request_messages(prompt)]
    return Sample(messages, max_tokens=payloads.SAMPLING_MAX_TOKENS)


def echo(text: str) -> types.CallToolResult:
    return _result("echo", text=text)


def sized(tokens_hint: int) -> types.CallToolResult:
    return _result("sized", tokens_hint=tokens_hint)


def records(n: int) -> types.CallToolResult:
    return _result("records", n=n)


def pretty_json(n: int) -> types.CallToolResult:
    return _result("pretty_json", n=n)


def structured(n: int) -> types.CallToolResult:
    return _result("structured", n=n)


def image() -> types.CallToolResult:
    return _result("image")


def padded_document() -> types.CallToolResult:
    return _result("padded_document")


def fail() -> types.CallToolResult:
    return _result("fail")


def boom() -> types.CallToolResult:
    raise MCPError(payloads.BOOM_CODE, payloads.BOOM_MESSAGE)


async def sample(
    prompt: str, reply: Annotated[types.CreateMessageResult, Resolve(ask_client_model)]
) -> types.CallToolResult:
    answer = reply.content.text if isinstance(reply.content, types.TextContent) else ""
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"sampled: {answer}")])


def review(code: str) -> str:
    return payloads.review_prompt_text(code)


_TOOLS = (echo, sized, records, pretty_json, structured, image, padded_document, fail, boom, sample)


def build_server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer(payloads.SERVER_NAMES["sdk_fastmcp"], version=payloads.SERVER_VERSION)
    descriptions = {spec.name: spec.description for spec in payloads.TOOL_SPECS}
    for tool in _TOOLS:
        server.tool(description=descriptions[tool.__name__])(tool)
    for uri, (name, description, reader) in payloads.RESOURCES.items():
        server.resource(uri, name=name, description=description, mime_type="text/plain")(reader)
    server.prompt(name=payloads.PROMPT_NAME, description=payloads.PROMPT_DESCRIPTION)(review)
    return server


def build_app() -> ServerApp:
    def http_app(transport: str) -> Any:
        server = build_server()
        if transport == "sse":
            return server.sse_app()
        return server.streamable_http_app(stateless_http=transport == "stateless-http")

    return ServerApp(run_stdio=lambda: build_server().run_stdio_async(), http_app=http_app)
