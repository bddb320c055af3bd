"""The one call every patch makes to deliver a result through the guard (when one is on)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.guard import GUARDED_METHODS

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard


def guarded(guard: Guard | None, result: object, **call: Any) -> object:
    """The result to deliver: `result` itself unless a guard is on and acts on it.

    `call` holds the `guard.core.GuardCall` fields. Never raises: the guard fails open.
    """
    if guard is None or call.get("method") not in GUARDED_METHODS:
        return result
    return guard.check_result(result, **call)


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
