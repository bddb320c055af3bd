# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The low-level server on mcp 2.x: `mcp.server.Server` with constructor-registered handlers."""

from __future__ import annotations

import warnings
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from . import payloads
from ._lowlevel_transports import http_app_for, run_stdio
from ._serve import ServerApp

SAMPLING_KEY = "sample"


async def _list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    tools = [
        types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema)
        for spec in payloads.TOOL_SPECS
    ]
    return types.ListToolsResult(tools=tools)


async def _call_tool(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    arguments = params.arguments or {}
    if params.name == "boom":
        raise MCPError(payloads.BOOM_CODE, payloads.BOOM_MESSAGE)
    if params.name == "sample":
        return await _sample(ctx, params, arguments["prompt"])
    return types.CallToolResult.model_validate(payloads.tool_result_wire(params.name, arguments))


def _sampling_request(prompt: str) -> types.CreateMessageRequest:
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=[
                types.SamplingMessage.model_validate(m) for m in payloads.sampling_request_messages(prompt)
            ],
            max_tokens=payloads.SAMPLING_MAX_TOKENS,
        )
    )


def _answer_text(result: Any) -> str:
    content = getattr(result, "content", None)
    return content.text if isinstance(content, types.TextContent) else ""


async def _sample(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, prompt: str
) -> types.CallToolResult | types.InputRequiredResult:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        # 2026-07-28 has no server-to-client back-channel: ask in the result, read the answer
        # from the client's retry.
        answer = (params.input_responses or {}).get(SAMPLING_KEY)
        if answer is None:
            return types.InputRequiredResult(input_requests={SAMPLING_KEY: _sampling_request(prompt)})
        text = _answer_text(answer)
    else:
        request = _sampling_request(prompt).params
        with warnings.catch_warnings():
            # Deprecated on 2026-07-28, still the only way on handshake-era connections.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            pending = ctx.session.create_message(
                messages=request.messages, max_tokens=request.max_tokens, related_request_id=ctx.request_id
            )
        text = _answer_text(await pending)
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"sampled: {text}")])


async def _list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    resources = [
        types.Resource(uri=uri, name=name, description=description, mime_type="text/plain")
        for uri, (name, description, _) in payloads.RESOURCES.items()
    ]
    return types.ListResourcesResult(resources=resources)


async def _read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    if params.uri not in payloads.RESOURCES:
        raise MCPError(types.INVALID_PARAMS, f"unknown resource {params.uri!r}")
    return types.ReadResourceResult.model_validate(payloads.resource_wire(params.uri))


async def _list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    prompt = types.Prompt(
        name=payloads.PROMPT_NAME,
        description=payloads.PROMPT_DESCRIPTION,
        arguments=[types.PromptArgument(name="code", required=True)],
    )
    return types.ListPromptsResult(prompts=[prompt])


async def _get_prompt(
    ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
) -> types.GetPromptResult:
    if params.name != payloads.PROMPT_NAME:
        raise MCPError(types.INVALID_PARAMS, f"unknown prompt {params.name!r}")
    return types.GetPromptResult.model_validate(payloads.prompt_wire((params.arguments or {})["code"]))


def build_server() -> Server[Any]:
    return Server(
        payloads.SERVER_NAMES["lowlevel"],
        version=payloads.SERVER_VERSION,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_list_resources,
        on_read_resource=_read_resource,
        on_list_prompts=_list_prompts,
        on_get_prompt=_get_prompt,
    )


def build_app() -> ServerApp:
    server = build_server()
    return ServerApp(
        run_stdio=lambda: run_stdio(server), http_app=lambda transport: http_app_for(server, transport)
    )
