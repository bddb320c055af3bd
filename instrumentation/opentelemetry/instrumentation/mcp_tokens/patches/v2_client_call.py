# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""One request on the mcp 2.x client side, and how its outcome reaches span and pipeline.

Shared by the requests a dispatcher sends (`v2_client`) and the requests the client
answers for its server (`v2_answers`).
"""

from __future__ import annotations

import functools
import uuid
import weakref
from contextvars import ContextVar, Token
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Span, SpanContext, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

from . import spans as semconv_spans
from .v2_common import (
    as_mapping,
    error_code_of,
    error_type_of,
    protocol_version_in,
    resource_uri_of,
    server_name_in,
    status_code_attributes,
)
from .v2_spans import Handoff, add_missing
from .v2_transport import TransportInfo

# The span of the latest request answered with an InputRequiredResult (2026-07-28): the
# input requests the client then serves belong to that call's trace.
INPUT_PARENT: ContextVar[SpanContext | None] = ContextVar("mcp_tokens_v2_input_parent", default=None)


class SessionInfo:
    """What we know of one ClientSession."""

    __slots__ = ("key", "server_name", "session", "started", "transport")

    def __init__(self, session: weakref.ref[Any], transport: TransportInfo) -> None:
        self.session = session
        self.transport = transport
        self.key = uuid.uuid4().hex
        self.server_name: str | None = None
        self.started: float | None = None


class ClientCall:
    """One request, from the wrapper's start to the pipeline."""

    def __init__(self, exchange: Exchange, handoff: Handoff, *, info: SessionInfo | None = None) -> None:
        self.exchange = exchange
        self.handoff = handoff
        self.info = info
        self.request_id: object = None
        self.claimed = False  # the SDK's span was adopted for this call
        self.receiver = False  # the client answers this request (for its server)
        self.rename = True  # the span is the SDK's, named "MCP send ..."
        self.span_attributes: dict[str, AttributeValue] = {}
        # The budget scope the application chose where the request started (it travels in baggage).
        self.explicit_scope: BudgetRef | None = None


class Reporter:
    """Writes a ClientCall's outcome on its exchange and span, and submits them."""

    def __init__(self, pipeline: Pipeline, tracer: Tracer, mcp_error: Any) -> None:
        self.pipeline = pipeline
        self._tracer = tracer
        self._mcp_error = mcp_error

    def open_span(self, call: ClientCall, kind: SpanKind, parent: otel_context.Context | None) -> Span:
        """Our own span for a request the SDK traces with none (in-process, answers)."""
        exchange = call.exchange
        span = self._tracer.start_span(
            semconv_spans.span_name(exchange.method, exchange.target), context=parent, kind=kind
        )
        call.handoff.attach(span, owns_end=True)
        call.rename = False
        return span

    def succeeded(self, call: ClientCall, result: object) -> None:
        method = call.exchange.method
        error = semconv.ERROR_TYPE_TOOL_ERROR if semconv_spans.is_tool_error(method, result) else None
        call.exchange.finish(result, error)
        if call.exchange.server_name is None:
            call.exchange.server_name = server_name_in(method, result)
        if method in ("initialize", "server/discover"):
            self._learn_identity(call, result)
        elif call.handoff.span is not None and not call.receiver:
            waits_for_input = as_mapping(result).get("resultType") == "input_required"
            INPUT_PARENT.set(call.handoff.span.get_span_context() if waits_for_input else None)

    def failed(self, call: ClientCall, exc: BaseException) -> None:
        call.exchange.finish(None, error_type_of(exc, self._mcp_error))
        call.exchange.metric_attributes.update(status_code_attributes(exc, self._mcp_error))
        span = call.handoff.span
        if span is not None and call.handoff.owns_end and span.is_recording():
            code = error_code_of(exc, self._mcp_error)
            if code is not None:
                message = getattr(exc, "message", None)
                semconv_spans.record_jsonrpc_error(span, code, message, receiver=call.receiver)
            else:
                semconv_spans.record_exception_type(span, exc)

    def close(self, call: ClientCall) -> None:
        """Hand everything to the pipeline, which adds the semconv attributes the span lacks
        just before it ends it."""
        uri = resource_uri_of(call.exchange.method, call.exchange.request)  # the worker drops the request
        call.handoff.before_end(functools.partial(_annotate, call, uri))
        call.handoff.submit()

    @staticmethod
    def _learn_identity(call: ClientCall, result: object) -> None:
        """initialize / server/discover name the server and the protocol version."""
        name = server_name_in(call.exchange.method, result)
        if name is not None and call.info is not None:
            call.info.server_name = name
        version = protocol_version_in(call.exchange.method, call.exchange.request, result)
        if version is not None:
            call.exchange.metric_attributes.setdefault(semconv.MCP_PROTOCOL_VERSION, version)
            call.span_attributes.setdefault(semconv.MCP_PROTOCOL_VERSION, version)


def _annotate(call: ClientCall, resource_uri: str | None) -> None:
    """The span's semconv attributes and name, once the call is over."""
    span = call.handoff.span
    if span is None or not span.is_recording():
        return
    exchange = call.exchange
    if call.rename:
        span.update_name(semconv_spans.span_name(exchange.method, exchange.target))
    attributes = semconv_spans.request_attributes(
        exchange.method, call.request_id, exchange.target, resource_uri
    )
    attributes.update(call.span_attributes)
    if call.rename:  # the SDK's span: its own attributes win
        add_missing(span, attributes)
    else:  # ours: nothing else wrote these
        span.set_attributes(attributes)
    if exchange.error_type == semconv.ERROR_TYPE_TOOL_ERROR:
        semconv_spans.record_tool_error(span)


def server_name_of(session: Any) -> str | None:
    info = getattr(session, "server_info", None) if session is not None else None
    name = getattr(info, "name", None)
    return name if isinstance(name, str) and name else None


class CurrentSpan:
    """Makes a span current for a block, nothing more (no recording or ending: the handoff
    does that). `use_span` does the same through two generator frames on every request."""

    __slots__ = ("_context", "_token")

    def __init__(self, span: Span | None, context: otel_context.Context | None = None) -> None:
        if context is None and span is not None:
            context = trace.set_span_in_context(span)
        self._context = context
        self._token: Token[otel_context.Context] | None = None

    def __enter__(self) -> None:
        if self._context is not None:
            self._token = otel_context.attach(self._context)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)
