# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The one call every patch makes to deliver a result through the guard (when one is on)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange
from opentelemetry.instrumentation.mcp_tokens.guard import GUARDED_METHODS
from opentelemetry.trace import Span

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)


def guarded(
    guard: Guard | None,
    result: object,
    exchange: Exchange,
    *,
    owns_scope: bool,
    span: Span | None,
    uri: str | None = None,
    server_name: str | None = None,
) -> object:
    """The result to deliver for `exchange`: `result` itself unless a guard is on and acts
    on it. Never raises: the guard fails open, and so does describing the call to it."""
    if guard is None or exchange.method not in GUARDED_METHODS:
        return result
    try:
        return guard.check_result(
            result,
            side=exchange.side.value,
            method=exchange.method,
            tool=exchange.target,
            server_name=server_name or exchange.server_name,
            scope=exchange.budget,
            owns_scope=owns_scope,
            arguments=arguments_of(exchange.request),
            uri=uri,
            span=span,
        )
    except Exception:
        _logger.debug("mcp-tokens could not hand a result to the guard", exc_info=True)
        return result


def arguments_of(params: object) -> object:
    """A tools/call request's arguments (for the repeat limit)."""
    return params.get("arguments") if isinstance(params, dict) else getattr(params, "arguments", None)


def replaced_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], name: str, value: object
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A call's arguments with its first argument (`name` when passed by keyword) replaced."""
    if args:
        return (value, *args[1:]), kwargs
    return args, {**kwargs, name: value}
