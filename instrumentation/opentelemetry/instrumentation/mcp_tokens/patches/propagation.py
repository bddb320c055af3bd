# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Trace context and baggage in MCP `params._meta` (SEP-414), for any SDK line.

The sender injects `traceparent`, `tracestate` and `baggage` with the configured global
propagators into a copy of the request's `_meta` (unprefixed keys, as the MCP semantic
conventions ask); the receiver extracts its parent from it. The budget-scope entry always
travels, even when the configured propagators leave baggage out: it is how a server learns
which conversation it serves. Everything here works on plain `_meta` dicts, so both SDK
lines share it, and tolerates hostile values (non-strings, junk headers) without raising.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry import baggage, propagate, trace
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.context import Context
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef, current_budget_scope

BAGGAGE_KEY = "baggage"
# A scope id is a label-like key, not a document: longer values from a peer are ignored.
MAX_SCOPE_CHARS = 256
MAX_WINDOW_DIGITS = 10
_BAGGAGE = W3CBaggagePropagator()


def inject_meta(meta: Mapping[str, Any] | None, context: Context, scope: BudgetRef | None) -> dict[str, Any]:
    """A new `_meta` dict: `meta`'s entries plus the propagation fields of `context`.

    `scope` (the caller's explicit budget scope) is added to `baggage` when the configured
    propagators did not carry it.
    """
    carrier: dict[str, str] = {}
    propagate.inject(carrier, context=context)
    if scope is not None and not _carries_scope(carrier.get(BAGGAGE_KEY)):
        _add_scope(carrier, scope)
    merged = dict(meta) if meta else {}
    merged.update(carrier)
    return merged


def carrier_of(meta: Mapping[str, Any] | None) -> dict[str, str]:
    """The string entries of a peer's `_meta`: what propagators may read."""
    if not meta:
        return {}
    return {key: value for key, value in meta.items() if isinstance(key, str) and isinstance(value, str)}


def extract_parent(meta: Mapping[str, Any] | None) -> Context | None:
    """The remote context a peer sent in `_meta`, or None when it sent no valid span context."""
    carrier = carrier_of(meta)
    if not carrier:
        return None
    context = propagate.extract(carrier, context=Context())
    if trace.get_current_span(context).get_span_context().is_valid:
        return context
    return None


def extract_headers(headers: Any) -> Context | None:
    """The context in transport (e.g. HTTP) headers, or None without a valid span context."""
    if headers is None:
        return None
    context = propagate.extract(headers, context=Context())
    return context if trace.get_current_span(context).get_span_context().is_valid else None


def budget_scope_of(meta: Mapping[str, Any] | None) -> BudgetRef | None:
    """The budget scope (and its context window) a peer named in the W3C baggage of its `_meta`.

    Read with the W3C baggage format whatever propagators are configured, so the scope
    arrives even where baggage propagation is otherwise off.
    """
    header = meta.get(BAGGAGE_KEY) if meta else None
    if not isinstance(header, str) or semconv.BAGGAGE_BUDGET_SCOPE not in header:
        return None
    return _scope_in(_BAGGAGE.extract({BAGGAGE_KEY: header}, context=Context()))


def explicit_budget_scope() -> BudgetRef | None:
    """The scope the application chose: `budget_scope(...)`, else a scope in current baggage."""
    ref = current_budget_scope()
    return ref if ref is not None else _scope_in(None)


def _scope_in(context: Context | None) -> BudgetRef | None:
    # One read of the baggage (an empty mapping unless someone set some), then plain lookups:
    # this runs on every request a client sends.
    entries = baggage.get_all(context)
    value = entries.get(semconv.BAGGAGE_BUDGET_SCOPE) if entries else None
    if not isinstance(value, str) or not 0 < len(value) <= MAX_SCOPE_CHARS:
        return None
    return BudgetRef(value, _context_window(entries.get(semconv.BAGGAGE_BUDGET_CONTEXT_WINDOW)))


def _context_window(value: object) -> int | None:
    """A peer's context window: a plain positive integer of at most 10 digits, else ignored."""
    if isinstance(value, str) and 0 < len(value) <= MAX_WINDOW_DIGITS and value.isascii() and value.isdigit():
        window = int(value)
        return window if window > 0 else None
    return None


def _carries_scope(header: str | None) -> bool:
    return header is not None and semconv.BAGGAGE_BUDGET_SCOPE + "=" in header


def _add_scope(carrier: dict[str, str], scope: BudgetRef) -> None:
    entry: dict[str, str] = {}
    context = baggage.set_baggage(semconv.BAGGAGE_BUDGET_SCOPE, scope.key, Context())
    if scope.context_window is not None:
        context = baggage.set_baggage(
            semconv.BAGGAGE_BUDGET_CONTEXT_WINDOW, str(scope.context_window), context
        )
    _BAGGAGE.inject(entry, context=context)
    encoded = entry.get(BAGGAGE_KEY)
    if not encoded:
        return
    existing = carrier.get(BAGGAGE_KEY)
    carrier[BAGGAGE_KEY] = f"{existing},{encoded}" if existing else encoded
