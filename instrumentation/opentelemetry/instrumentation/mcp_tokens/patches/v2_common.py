# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Small readers of mcp 2.x wire dicts shared by the client and server patches.

Everything here reads peer-supplied JSON, so every accessor tolerates missing keys and
wrong types and never raises.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from typing import Any, TypeVar

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.util.types import AttributeValue

from .spans import ERROR_TYPE_CANCELLED, is_cancellation

_logger = logging.getLogger(__name__)

# The 2026-07-28 `_meta` keys (mcp_types constants; spelled out so reading them needs no import).
SERVER_INFO_META_KEY = "io.modelcontextprotocol/serverInfo"
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
INVALID_PARAMS = -32602

# Methods whose `params.name` names a tool or prompt (the label and span-name target).
_NAMED_TARGET_METHODS = frozenset({"tools/call", "prompts/get"})
# Methods whose `params.uri` is the semconv `mcp.resource.uri` (never a label).
_RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})

T = TypeVar("T")


def as_mapping(value: object) -> Mapping[str, Any]:
    # A dict first: the Mapping check alone goes through the ABC machinery, a few times on
    # every request.
    return value if isinstance(value, (dict, Mapping)) else {}


def target_of(method: str, params: object) -> str | None:
    if method not in _NAMED_TARGET_METHODS:
        return None
    name = as_mapping(params).get("name")
    return name if isinstance(name, str) and name else None


def resource_uri_of(method: str, params: object) -> str | None:
    if method not in _RESOURCE_METHODS:
        return None
    uri = as_mapping(params).get("uri")
    return uri if isinstance(uri, str) and uri else None


def meta_of(params: object) -> Mapping[str, Any]:
    return as_mapping(as_mapping(params).get("_meta"))


def server_name_in(method: str, result: object) -> str | None:
    """The server's name as a result states it: `initialize`'s serverInfo, or the 2026 stamp."""
    mapping = as_mapping(result)
    info = mapping.get("serverInfo") if method == "initialize" else meta_of(mapping).get(SERVER_INFO_META_KEY)
    name = as_mapping(info).get("name")
    return name if isinstance(name, str) and name else None


def protocol_version_in(method: str, params: object, result: object) -> str | None:
    """The protocol version an `initialize` result or a 2026-07-28 request envelope names."""
    if method == "initialize":
        version = as_mapping(result).get("protocolVersion")
    else:
        version = meta_of(params).get(PROTOCOL_VERSION_META_KEY)
    return version if isinstance(version, str) and version else None


def error_code_of(exc: BaseException, mcp_error: type[BaseException] | None) -> int | None:
    """The JSON-RPC code an exception stands for: an MCPError's own, INVALID_PARAMS for a
    pydantic ValidationError (what the SDK writes for it), else None."""
    if mcp_error is not None and isinstance(exc, mcp_error):
        code = getattr(exc, "code", None)
        return code if isinstance(code, int) else None
    if type(exc).__name__ == "ValidationError" and type(exc).__module__.startswith("pydantic"):
        return INVALID_PARAMS
    return None


def error_type_of(exc: BaseException, mcp_error: type[BaseException] | None) -> str:
    """`error.type` of a failed operation: the JSON-RPC code, `cancelled`, or the exception type."""
    code = error_code_of(exc, mcp_error)
    if code is not None:
        return str(code)
    return ERROR_TYPE_CANCELLED if is_cancellation(exc) else type(exc).__qualname__


def status_code_attributes(
    exc: BaseException, mcp_error: type[BaseException] | None
) -> dict[str, AttributeValue]:
    code = error_code_of(exc, mcp_error)
    return {semconv.RPC_RESPONSE_STATUS_CODE: str(code)} if code is not None else {}


def reset_quietly(variable: ContextVar[T], token: Token[T]) -> None:
    # Not contextlib.suppress: three more calls on every request.
    try:  # noqa: SIM105
        variable.reset(token)
    except ValueError:  # reset from another context than the one that set it
        pass


def safely(function: Callable[..., Any], *args: Any) -> Any:
    """Run our bookkeeping; a failure of ours is logged, never raised into the host."""
    try:
        return function(*args)
    except Exception:
        _logger.debug("mcp-tokens bookkeeping failed", exc_info=True)
        return None


def import_optional(name: str) -> Any:
    """A module of the SDK that may not exist in every 2.x release (None then)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
