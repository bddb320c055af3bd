# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Budget scopes: which context window an MCP exchange is charged to.

The context window belongs to the agent. By default each ClientSession is its own scope;
an application that runs one conversation across several servers says so:

    with budget_scope("conversation-42", context_window=128_000):
        await session_a.call_tool(...)
        await session_b.call_tool(...)

The scope id (and its context window, when given) also travels to the servers in W3C
baggage inside `_meta`, so their own telemetry charges the same conversation.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import NamedTuple

from opentelemetry import baggage, context

from . import semconv


class BudgetRef(NamedTuple):
    """Which budget scope an exchange is charged to."""

    key: str
    context_window: int | None = None


_current: ContextVar[BudgetRef | None] = ContextVar("mcp_tokens_budget_scope", default=None)


@contextmanager
def budget_scope(scope_id: str, *, context_window: int | None = None) -> Iterator[BudgetRef]:
    """Charge every MCP exchange inside the block to `scope_id` (and tell the servers)."""
    ref = BudgetRef(str(scope_id), context_window)
    token = _current.set(ref)
    otel_context = baggage.set_baggage(semconv.BAGGAGE_BUDGET_SCOPE, ref.key)
    if context_window is not None:
        otel_context = baggage.set_baggage(
            semconv.BAGGAGE_BUDGET_CONTEXT_WINDOW, str(context_window), otel_context
        )
    otel_token = context.attach(otel_context)
    try:
        yield ref
    finally:
        context.detach(otel_token)
        _current.reset(token)


def current_budget_scope() -> BudgetRef | None:
    return _current.get()
