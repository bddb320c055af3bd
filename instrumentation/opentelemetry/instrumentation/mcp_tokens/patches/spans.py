# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""MCP semantic-convention rules for the spans mcp-tokens creates, for any SDK line.

Names are `{mcp.method.name} {target}` (the tool or prompt) or `{mcp.method.name}`.
Errors: the sender marks every JSON-RPC error; the receiver does not mark the codes that
mean the caller made a mistake (parse error, invalid request, unknown method, invalid
params, resource not found). A tool result with `isError: true` is `error.type=tool_error`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.trace import Span, StatusCode
from opentelemetry.util.types import AttributeValue

# JSON-RPC codes a receiver should not mark as errors (semconv MCP common.yaml).
CALLER_MISTAKE_CODES = frozenset({-32700, -32600, -32601, -32602, -32002})
ERROR_TYPE_CANCELLED = "cancelled"
# Span names, like label values, are bounded: a peer chooses tool and prompt names.
MAX_NAME_CHARS = 128


def span_name(method: str, target: str | None) -> str:
    return f"{method} {target[:MAX_NAME_CHARS]}" if target else method


def request_attributes(
    method: str,
    request_id: object,
    target: str | None,
    resource_uri: str | None,
) -> dict[str, AttributeValue]:
    """The semconv attributes known when a request starts."""
    attributes: dict[str, AttributeValue] = {semconv.MCP_METHOD_NAME: method}
    if request_id is not None:
        attributes[semconv.JSONRPC_REQUEST_ID] = str(request_id)
    if target:
        attributes[semconv.target_attribute(method)] = target
    if resource_uri:
        attributes[semconv.MCP_RESOURCE_URI] = resource_uri
    if method == "tools/call":
        attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_EXECUTE_TOOL
    return attributes


# The network attributes duration metrics carry too: a client's address and port would make
# a label value per peer, so they stay on spans.
METRIC_NETWORK_KEYS = frozenset(
    {semconv.NETWORK_TRANSPORT, semconv.NETWORK_PROTOCOL_NAME, semconv.NETWORK_PROTOCOL_VERSION}
)


def http_request_attributes(request: object) -> dict[str, AttributeValue]:
    """The network attributes of the HTTP request that carried an MCP request to a server
    (anything with an ASGI `scope`, such as starlette's `Request`): transport, protocol and
    its version, the client's address and port."""
    attributes: dict[str, AttributeValue] = {
        semconv.NETWORK_TRANSPORT: "tcp",
        semconv.NETWORK_PROTOCOL_NAME: "http",
    }
    scope = getattr(request, "scope", None)
    if not isinstance(scope, Mapping):
        return attributes
    version = scope.get("http_version")
    if isinstance(version, str) and version:
        attributes[semconv.NETWORK_PROTOCOL_VERSION] = version
    client = scope.get("client")
    if isinstance(client, list | tuple) and len(client) == 2:
        host, port = client
        if isinstance(host, str):
            attributes[semconv.CLIENT_ADDRESS] = host
        if isinstance(port, int):
            attributes[semconv.CLIENT_PORT] = port
    return attributes


def is_tool_error(method: str, result: object) -> bool:
    return (
        method == "tools/call"
        and isinstance(result, (dict, Mapping))  # a dict first: the ABC check is slow
        and result.get("isError") is True
    )


def record_tool_error(span: Span) -> str:
    span.set_attribute(semconv.ERROR_TYPE, semconv.ERROR_TYPE_TOOL_ERROR)
    span.set_status(StatusCode.ERROR)
    return semconv.ERROR_TYPE_TOOL_ERROR


def record_jsonrpc_error(span: Span, code: object, message: object, *, receiver: bool) -> str:
    """Mark a JSON-RPC error on `span`; returns the `error.type` value (the code as text)."""
    error_type = str(code) if isinstance(code, int) else semconv.OTHER_VALUE
    span.set_attribute(semconv.ERROR_TYPE, error_type)
    if isinstance(code, int):
        span.set_attribute(semconv.RPC_RESPONSE_STATUS_CODE, str(code))
    if not (receiver and code in CALLER_MISTAKE_CODES):
        span.set_status(StatusCode.ERROR, message if isinstance(message, str) else None)
    return error_type


def record_exception_type(span: Span, exc: BaseException | None) -> str:
    """Mark an exception that ended an operation (timeout, transport failure, cancellation).

    A cancelled operation (or one that ended without a response, `exc` None) is
    `error.type=cancelled` and keeps an unset status: the caller gave up, nothing failed.
    """
    if exc is None or is_cancellation(exc):
        span.set_attribute(semconv.ERROR_TYPE, ERROR_TYPE_CANCELLED)
        return ERROR_TYPE_CANCELLED
    error_type = type(exc).__qualname__
    span.set_attribute(semconv.ERROR_TYPE, error_type)
    span.set_status(StatusCode.ERROR, error_type)
    return error_type


def is_cancellation(exc: BaseException) -> bool:
    """Whether `exc` is the running async library's cancellation (asyncio's when none runs)."""
    try:
        import anyio  # noqa: PLC0415 -- the running async library, whichever is installed

        cancelled: type[BaseException] = anyio.get_cancelled_exc_class()
    except Exception:
        cancelled = asyncio.CancelledError
    return isinstance(exc, cancelled | asyncio.CancelledError)


def error_code_attributes(code: object) -> dict[str, Any]:
    """Attributes of the duration metric for a JSON-RPC error code."""
    return {semconv.RPC_RESPONSE_STATUS_CODE: str(code)} if isinstance(code, int) else {}
