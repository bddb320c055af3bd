# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x: requests this process sends, as CLIENT spans and exchanges.

`BaseSession.send_request` is the funnel for every request a ClientSession sends, and for
the server-to-client requests a ServerSession sends (sampling/createMessage, elicitation,
roots/list, ping): those are client operations of the server process. The wrapper starts
the CLIENT span, injects trace context and baggage into a copy of the request's
`params._meta`, and reads the request id before the SDK assigns it. `_handle_response`
keeps the raw wire result (the parsed JSON dict, never a re-dump) for the ids this
instrumentation is waiting for. When `send_request` returns or raises, the exchange is
finished and handed to the pipeline; the worker ends the span.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Span, SpanKind

from . import spans, v1_requests
from .guarding import guarded
from .guarding import replaced_argument as _replaced
from .propagation import explicit_budget_scope, inject_meta
from .v1_handlers import RequestHandlers
from .v1_sessions import SessionState

if TYPE_CHECKING:
    pass

_logger = logging.getLogger(__name__)


@dataclass(slots=True)
class _Outgoing:
    exchange: Exchange
    span: Span
    request_id: object
    raw: object = None
    uri: str | None = None


class OutgoingRequests(RequestHandlers):
    # --- BaseSession.send_request ----------------------------------------------------------
    async def send_request(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call: _Outgoing | None = None
        if self._is_on():
            try:
                call, args, kwargs = self._begin(instance, args, kwargs)
            except Exception:
                _logger.debug("mcp-tokens could not trace an MCP request", exc_info=True)
        if call is None:
            return await wrapped(*args, **kwargs)
        # Nothing may run between reading the request id in _begin and this call: the SDK
        # assigns `_request_id` synchronously at the start of send_request.
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self._finish(instance, call, exc)
            raise
        self._finish(instance, call, None)
        return result

    def _begin(
        self, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[_Outgoing | None, tuple[Any, ...], dict[str, Any]]:
        request = args[0] if args else kwargs.get("request")
        root = v1_requests.request_root(request)
        method = getattr(root, "method", None)
        if not isinstance(method, str):
            return None, args, kwargs
        params = getattr(root, "params", None)
        state = self._sessions.state(session)
        side = self._sessions.role_of(session) or Side.CLIENT
        request_id = getattr(session, "_request_id", None)
        target = v1_requests.target_of(method, params)
        scope = explicit_budget_scope() if side is Side.CLIENT else None
        exchange = Exchange(
            side=side,
            method=method,
            request=v1_requests.counted_request(method, params),
            target=target,
            budget=_budget(side, scope, state),
            end_span=True,
            operation_side=Side.CLIENT,
        )
        # Started last: nothing that could fail runs between here and the caller's call.
        span = self._tracer.start_span(
            spans.span_name(method, target),
            kind=SpanKind.CLIENT,
            attributes=spans.request_attributes(
                method, request_id, target, v1_requests.resource_uri_of(method, params)
            ),
            start_time=exchange.start_ns,
        )
        exchange.span = span
        call = _Outgoing(exchange, span, request_id, uri=v1_requests.resource_uri_of(method, params))
        state.pending[request_id] = call
        args, kwargs = self._inject(request, span, scope, args, kwargs)
        return call, args, kwargs

    def _inject(
        self,
        request: Any,
        span: Span,
        scope: BudgetRef | None,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments with a copy of the request carrying the span in `_meta`."""
        try:
            params = getattr(v1_requests.request_root(request), "params", None)
            meta = inject_meta(v1_requests.meta_of(params), trace.set_span_in_context(span), scope)
            copy = v1_requests.with_meta(request, meta, self._sdk.RequestParams.Meta)
        except Exception:
            _logger.debug("mcp-tokens could not propagate context in _meta", exc_info=True)
            return args, kwargs
        if args:
            return (copy, *args[1:]), kwargs
        return args, {**kwargs, "request": copy}

    # --- BaseSession._handle_response -----------------------------------------------------
    async def handle_response(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self._is_on():
            try:
                message = self._keep_raw_result(instance, args[0] if args else kwargs.get("message"))
                if message is not None:  # the guard changed the result
                    args, kwargs = _replaced(args, kwargs, "message", message)
            except Exception:
                _logger.debug("mcp-tokens could not read an MCP response", exc_info=True)
        return await wrapped(*args, **kwargs)

    def _keep_raw_result(self, session: Any, message: Any) -> Any:
        """Keep the raw result of a request we wait for; the message to hand on instead of
        `message` when the guard changed the result (else None)."""
        state = self._sessions.find(session)
        if state is None or not state.pending:
            return None
        root = getattr(getattr(message, "message", None), "root", None)
        if not isinstance(root, self._sdk.JSONRPCResponse):
            return None
        request_id = _normalize_id(root.id)
        call = state.pending.get(request_id)
        # Only ids the SDK will deliver to a waiting send_request (not those of routers).
        if call is None or request_id not in getattr(session, "_response_streams", {}):
            return None
        call.raw = root.result
        if self._guard is None or call.exchange.side is not Side.CLIENT:
            return None
        delivered = guarded(
            self._guard,
            root.result,
            call.exchange,
            owns_scope=True,
            span=call.span,
            uri=call.uri,
            server_name=state.server_name,
        )
        if delivered is root.result:
            return None
        call.raw = delivered
        inner = message.message.model_copy(update={"root": root.model_copy(update={"result": delivered})})
        return dataclasses.replace(message, message=inner)

    # --- completion -----------------------------------------------------------------------
    def _finish(self, session: Any, call: _Outgoing, error: BaseException | None) -> None:
        try:
            state = self._sessions.state(session)
            state.pending.pop(call.request_id, None)
            exchange, span = call.exchange, call.span
            exchange.finish(call.raw, self._error_type(exchange, span, call.raw, error))
            if exchange.method == "initialize" and error is None:
                state.remember_initialize(call.raw)
            exchange.server_name = state.server_name
            self._describe_connection(session, state, exchange, span)
            self._pipeline.submit(exchange)
        except Exception:
            _logger.debug("mcp-tokens could not finish an MCP request", exc_info=True)

    def _error_type(
        self, exchange: Exchange, span: Span, raw: object, error: BaseException | None
    ) -> str | None:
        if error is None:
            return spans.record_tool_error(span) if spans.is_tool_error(exchange.method, raw) else None
        if isinstance(error, self._sdk.McpError):
            data = getattr(error, "error", None)
            code = getattr(data, "code", None)
            exchange.metric_attributes.update(spans.error_code_attributes(code))
            return spans.record_jsonrpc_error(span, code, getattr(data, "message", None), receiver=False)
        return spans.record_exception_type(span, error)

    def _describe_connection(self, session: Any, state: SessionState, exchange: Exchange, span: Span) -> None:
        """Protocol version, transport and session id: known once the session is under way."""
        attributes = exchange.metric_attributes
        if state.protocol_version:
            attributes[semconv.MCP_PROTOCOL_VERSION] = state.protocol_version
        info = self._sessions.transport(session)
        if info is not None:
            attributes.update(info.attributes(with_server=state.role is Side.CLIENT))
        if span.is_recording():
            span.set_attributes(attributes)
            session_id = info.session_id() if info is not None else None
            if session_id:
                span.set_attribute(semconv.MCP_SESSION_ID, session_id)


def _budget(side: Side, scope: BudgetRef | None, state: SessionState) -> BudgetRef | None:
    """Client side: the application's scope, else one scope per ClientSession. A server's own
    requests (sampling) are not charged to any context window."""
    if side is not Side.CLIENT:
        return None
    return scope if scope is not None else BudgetRef(state.connection_scope())


def _normalize_id(request_id: object) -> object:
    """The SDK sends integer ids; a peer may echo them as strings ("0")."""
    if isinstance(request_id, str):
        try:
            return int(request_id)
        except ValueError:
            return request_id
    return request_id
