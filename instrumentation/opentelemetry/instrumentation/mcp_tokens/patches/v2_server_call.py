# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""One inbound request on the mcp 2.x server side, from the chain's outer end to its span's end.

`ServerHooks` (v2_server) opens a `ServerCall` around the middleware chain; the call
records the wire result (or the exception) the innermost link saw, holds the span it
will annotate (the SDK's, adopted, or fastmcp's, deferred), adds the semconv attributes
the span lacks and hands span and exchange to the pipeline once, when the span's owner
is done with it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Span, get_current_span
from opentelemetry.util.types import AttributeValue

from . import spans as semconv_spans
from .v2_common import error_type_of, resource_uri_of, status_code_attributes
from .v2_spans import (
    Handoff,
    add_missing,
    cancel_deferral,
    defer_end,
    is_held,
    is_mcp_server_span,
    readable_attributes,
)
from .v2_transport import TransportInfo

_logger = logging.getLogger(__name__)


class ServerCall:
    """One inbound request, from the outer end of the middleware chain to its span's end."""

    def __init__(
        self,
        runner: Any,
        ctx: Any,
        exchange: Exchange,
        *,
        pipeline: Pipeline,
        transport: TransportInfo,
        mcp_error: Any,
    ) -> None:
        self.runner = runner
        self.ctx = ctx
        self.exchange = exchange
        self.handoff = Handoff(pipeline, exchange)
        self.transport = transport
        self._mcp_error = mcp_error
        self.span_claimed = False
        self.inner_started = False
        self.finished = False
        self.deferred: Span | None = None
        # Whether the budget scope is this server's own (see ServerHooks._budget).
        self.owns_scope = False
        self.failure_attributes: dict[str, AttributeValue] = {}

    # --- the span --------------------------------------------------------------------
    def claim_span(self) -> bool:
        """True once: the first SERVER span the SDK opens in this request is ours to adopt."""
        if self.span_claimed or self.handoff.span is not None:
            return False
        self.span_claimed = True
        return True

    def adopt(self, span: Span) -> None:
        self.handoff.attach(span, owns_end=True)

    def span_exited(self, failure: BaseException | None) -> None:
        """The adopted span's block ended: everything the SDK sets on it is set."""
        try:
            if failure is not None and not self.finished:
                self.fail(failure)
            self._enrich()
        except Exception:
            _logger.debug("mcp-tokens could not enrich a server span", exc_info=True)
        self.handoff.submit()

    def start_inner(self) -> None:
        """The innermost link starts: defer the end of the current MCP span if none was adopted."""
        # Spans opened from here on are the handler's (or a nested server's), never ours.
        self.inner_started = self.span_claimed = True
        if self.handoff.span is not None:
            return
        try:
            span = get_current_span()
            if (
                is_mcp_server_span(span, self.exchange.method)
                and not is_held(span)
                and defer_end(span, self._owner_ended)
            ):
                self.deferred = span
                self.handoff.attach(span, owns_end=True)
        except Exception:
            _logger.debug("mcp-tokens could not defer a server span", exc_info=True)

    def _owner_ended(self, end_ns: int | None) -> None:
        self.deferred = None
        try:
            self._enrich()
        except Exception:
            _logger.debug("mcp-tokens could not enrich a server span", exc_info=True)
        self.handoff.submit(end_ns)

    # --- the outcome -----------------------------------------------------------------
    def succeed(self, result: object) -> None:
        self.finished = True
        error = (
            semconv.ERROR_TYPE_TOOL_ERROR
            if semconv_spans.is_tool_error(self.exchange.method, result)
            else None
        )
        self.exchange.finish(result, error)

    def fail(self, exc: BaseException) -> None:
        self.finished = True
        self.exchange.finish(None, error_type_of(exc, self._mcp_error))
        self.failure_attributes = status_code_attributes(exc, self._mcp_error)
        self.exchange.metric_attributes.update(self.failure_attributes)

    def close(self) -> None:
        """The whole chain returned: report what no span end has reported yet."""
        if self.handoff.done:
            return
        if self.deferred is not None:
            # The owner never ended its span inside the chain: leave it to the owner.
            cancel_deferral(self.deferred)
            self.deferred = None
            self.handoff.span, self.handoff.owns_end = None, False
        self.handoff.submit()

    def _enrich(self) -> None:
        """Have the span get the semconv attributes it lacks just before it ends
        (Handoff.before_end): the values are taken now, so nothing of the request is held
        until then, and put together then, off the request's path where the worker ends it."""
        span = self.handoff.span
        if span is None:
            return
        exchange = self.exchange
        facts = _RequestFacts(
            resource_uri_of(exchange.method, exchange.request),
            self.ctx.request_id,
            self.ctx.protocol_version,
            getattr(self.runner.connection, "session_id", None),
            self.transport.span,
            self.failure_attributes,
        )
        self.handoff.before_end(functools.partial(annotate_server_span, span, exchange, facts))


class _RequestFacts(NamedTuple):
    resource_uri: str | None
    request_id: object
    protocol_version: Any  # the SDK's own value, as the SDK sets it
    session_id: object
    transport: Mapping[str, AttributeValue]
    failure: dict[str, AttributeValue]


def annotate_server_span(span: Span, exchange: Exchange, facts: _RequestFacts) -> None:
    """Add the attributes a server span lacks and, if it is still named after the bare method
    (fastmcp names a span before it knows the target), its full name."""
    if not span.is_recording():
        return
    method, target = exchange.method, exchange.target
    attributes = semconv_spans.request_attributes(method, facts.request_id, target, facts.resource_uri)
    attributes[semconv.MCP_PROTOCOL_VERSION] = facts.protocol_version
    if isinstance(facts.session_id, str) and facts.session_id:
        attributes[semconv.MCP_SESSION_ID] = facts.session_id
    attributes.update(facts.transport)
    attributes.update(facts.failure)
    tool_error = exchange.error_type == semconv.ERROR_TYPE_TOOL_ERROR
    if exchange.error_type is not None and not tool_error:
        # The SDK and fastmcp mark raised errors themselves (theirs win); not a cancellation.
        attributes[semconv.ERROR_TYPE] = exchange.error_type
    if tool_error and semconv.ERROR_TYPE not in readable_attributes(span):
        semconv_spans.record_tool_error(span)
    add_missing(span, attributes)
    if target and getattr(span, "name", None) == method:
        span.update_name(semconv_spans.span_name(method, target))


CURRENT_CALL: ContextVar[ServerCall | None] = ContextVar("mcp_tokens_v2_server_call", default=None)


def current_server_call() -> ServerCall | None:
    """The inbound request being served in this context (for server-to-client requests)."""
    return CURRENT_CALL.get()
