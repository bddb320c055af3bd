# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x: requests this process receives, as SERVER spans and exchanges.

Where a received request starts:
- `Server._handle_request`: every request a server handles, except `initialize`;
- `ServerSession._received_request`: `initialize`, which the session answers itself;
- `ClientSession._received_request`: server-to-client requests (sampling/createMessage,
  elicitation, roots/list, ping), answered by the client's callbacks.
The SERVER span is parented on the context the peer sent in `params._meta` (falling back
to the HTTP request's `traceparent`, then to the ambient context) and is current while
the handler runs. `RequestResponder.respond` completes the exchange: the response is
dumped as the transport will write it (`model_dump(by_alias=True, mode="json",
exclude_none=True)`), only for the methods whose results are counted.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import RESPONSE_KINDS, Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Link, Span, SpanKind

from . import spans, v1_requests
from .guarding import guarded
from .guarding import replaced_argument as _replaced
from .propagation import budget_scope_of, extract_headers, extract_parent
from .v1_handlers import RequestHandlers
from .v1_sessions import SessionState

if TYPE_CHECKING:
    pass

_logger = logging.getLogger(__name__)

_PROTOCOL_VERSION_HEADER = "mcp-protocol-version"


@dataclass(slots=True)
class _Incoming:
    exchange: Exchange
    span: Span
    state: SessionState
    session: Any
    context: Context
    done: bool = False
    uri: str | None = None
    # Whether the budget scope is this server's own (a session or a connection).
    owns_scope: bool = False


class IncomingRequests(RequestHandlers):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._calls: weakref.WeakKeyDictionary[Any, _Incoming] = weakref.WeakKeyDictionary()

    # --- where requests start -------------------------------------------------------------
    async def handle_request(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """Server._handle_request(message, req, session, lifespan_context, raise_exceptions)."""
        call = self._safe_begin(_argument(args, kwargs, 0, "message"), _argument(args, kwargs, 2, "session"))
        return await self._run(call, wrapped, args, kwargs)

    async def server_received_request(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """ServerSession._received_request(responder): only `initialize` is answered here."""
        responder = _argument(args, kwargs, 0, "responder")
        request = v1_requests.request_root(getattr(responder, "request", None))
        call = (
            self._safe_begin(responder, instance)
            if isinstance(request, self._sdk.InitializeRequest)
            else None
        )
        return await self._run(call, wrapped, args, kwargs)

    async def client_received_request(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """ClientSession._received_request(responder): the client answering its server."""
        call = self._safe_begin(_argument(args, kwargs, 0, "responder"), instance)
        return await self._run(call, wrapped, args, kwargs)

    async def _run(
        self,
        call: _Incoming | None,
        wrapped: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if call is None:
            return await wrapped(*args, **kwargs)
        token = _attach(call.context)
        try:
            return await wrapped(*args, **kwargs)
        except BaseException as exc:
            self._abandon(call, exc)
            raise
        finally:
            _detach(token)
            # A request that was never answered (cancelled by the client) still ends its span.
            self._abandon(call, None)

    # --- RequestResponder.respond ---------------------------------------------------------
    async def respond(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        call = self._calls.get(instance) if self._is_on() else None
        if call is None and self._is_on():
            # A request answered on a path this module does not wrap: still counted.
            call = self._safe_begin(instance, getattr(instance, "_session", None))
        if call is None:
            return await wrapped(*args, **kwargs)
        response = args[0] if args else kwargs.get("response")
        wire: object = None
        if self._guard is not None:
            response, wire = self._guarded(call, response)
            args, kwargs = _replaced(args, kwargs, "response", response)
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            self._abandon(call, exc)
            raise
        self._complete(call, instance, response, wire)
        return result

    def _guarded(self, call: _Incoming, response: object) -> tuple[object, object]:
        """The response to send after the guard, and its wire dump (None if not dumped)."""
        exchange = call.exchange
        if call.state.role is not Side.SERVER or isinstance(response, self._sdk.ErrorData):
            return response, None
        try:
            wire = _wire_result(exchange.method, response)
            delivered = guarded(
                self._guard,
                wire,
                exchange,
                owns_scope=call.owns_scope,
                span=call.span,
                uri=call.uri,
                server_name=call.state.server_name,
            )
            if delivered is wire:
                return response, wire
            return _typed_like(response, delivered), delivered
        except Exception:
            _logger.debug("mcp-tokens: the guard could not act on a response", exc_info=True)
            return response, None

    # --- internals ------------------------------------------------------------------------
    def _safe_begin(self, responder: Any, session: Any) -> _Incoming | None:
        if not self._is_on() or responder is None or session is None:
            return None
        try:
            if responder in self._calls:
                return None
            call = self._begin(responder, session)
            if call is not None:
                self._calls[responder] = call
            return call
        except Exception:
            _logger.debug("mcp-tokens could not trace a received MCP request", exc_info=True)
            return None

    def _begin(self, responder: Any, session: Any) -> _Incoming | None:
        root = v1_requests.request_root(getattr(responder, "request", None))
        method = getattr(root, "method", None)
        if not isinstance(method, str):
            return None
        params = getattr(root, "params", None)
        state = self._sessions.state(session)
        meta = v1_requests.meta_extras_of(getattr(responder, "request_meta", None))
        http_request = getattr(getattr(responder, "message_metadata", None), "request_context", None)
        parent = extract_parent(meta)
        header_context = extract_headers(getattr(http_request, "headers", None)) if http_request else None
        target = v1_requests.target_of(method, params)
        attributes = spans.request_attributes(
            method,
            getattr(responder, "request_id", None),
            target,
            v1_requests.resource_uri_of(method, params),
        )
        if http_request is not None:
            attributes.update(spans.http_request_attributes(http_request))
        start_ns = time.time_ns()
        span = self._tracer.start_span(
            spans.span_name(method, target),
            context=parent or header_context,
            kind=SpanKind.SERVER,
            attributes=attributes,
            links=_ambient_link(parent, header_context),
            start_time=start_ns,
        )
        budget, owns_scope = self._budget(state, session, meta)
        exchange = Exchange(
            side=state.role,
            method=method,
            start_ns=start_ns,
            request=v1_requests.counted_request(method, params),
            target=target,
            server_name=state.server_name,
            budget=budget,
            span=span,
            end_span=True,
            operation_side=Side.SERVER,
        )
        exchange.metric_attributes.update(
            {key: value for key, value in attributes.items() if key in spans.METRIC_NETWORK_KEYS}
        )
        span_context = trace.set_span_in_context(span, parent or header_context)
        uri = v1_requests.resource_uri_of(method, params)
        return _Incoming(exchange, span, state, session, span_context, uri=uri, owns_scope=owns_scope)

    def _budget(
        self, state: SessionState, session: Any, meta: Mapping[str, Any]
    ) -> tuple[BudgetRef | None, bool]:
        """Server side: the scope the client sent in baggage, else the transport's session id,
        else this connection (the last two are the server's own). A client answering its
        server charges nothing."""
        if state.role is not Side.SERVER:
            return None, False
        sent = budget_scope_of(meta)
        if sent is not None:
            return sent, False
        info = self._sessions.transport(session)
        scope = info.session_id() if info is not None else None
        return BudgetRef(scope or state.connection_scope()), True

    def _complete(self, call: _Incoming, responder: Any, response: object, wire: object = None) -> None:
        if call.done:
            return
        call.done = True
        try:
            end_ns = time.time_ns()
            if getattr(responder, "cancelled", False):
                self._submit(call, None, spans.record_exception_type(call.span, None), end_ns)
                return
            exchange, span = call.exchange, call.span
            error_type: str | None = None
            if isinstance(response, self._sdk.ErrorData):
                exchange.metric_attributes.update(spans.error_code_attributes(response.code))
                error_type = spans.record_jsonrpc_error(span, response.code, response.message, receiver=True)
            else:
                if wire is None:
                    wire = _wire_result(exchange.method, response)
                if spans.is_tool_error(exchange.method, wire):
                    error_type = spans.record_tool_error(span)
                if exchange.method == "initialize":
                    call.state.remember_initialize(_initialize_fields(response))
            self._submit(call, wire, error_type, end_ns, responder)
        except Exception:
            _logger.debug("mcp-tokens could not finish a received MCP request", exc_info=True)
        finally:
            self._calls.pop(responder, None)

    def _abandon(self, call: _Incoming, error: BaseException | None) -> None:
        """End an exchange that got no response: the handler raised, or it was cancelled."""
        if call.done:
            return
        call.done = True
        try:
            self._submit(call, None, spans.record_exception_type(call.span, error), time.time_ns())
        except Exception:
            _logger.debug("mcp-tokens could not end a received MCP request", exc_info=True)

    def _submit(
        self, call: _Incoming, wire: object, error_type: str | None, end_ns: int, responder: Any = None
    ) -> None:
        exchange, span, state = call.exchange, call.span, call.state
        exchange.finish(wire, error_type)
        exchange.end_ns = end_ns
        exchange.server_name = state.server_name
        version = state.protocol_version or _header_protocol_version(responder)
        if version:
            exchange.metric_attributes[semconv.MCP_PROTOCOL_VERSION] = version
        info = self._sessions.transport(call.session)
        if info is not None:
            exchange.metric_attributes.update(info.attributes(with_server=False))
        if span.is_recording():
            span.set_attributes(exchange.metric_attributes)
            session_id = info.session_id() if info is not None else None
            if session_id:
                span.set_attribute(semconv.MCP_SESSION_ID, session_id)
        self._pipeline.submit(exchange)


def _wire_result(method: str, response: object) -> object:
    """The result as the transport writes it, for methods whose result is counted."""
    if method not in RESPONSE_KINDS:
        return None
    dump = getattr(response, "model_dump", None)
    return dump(by_alias=True, mode="json", exclude_none=True) if dump is not None else None


def _typed_like(response: Any, wire: object) -> Any:
    """`wire` as the SDK's model `response` was (a ServerResult around a CallToolResult...)."""
    root = v1_requests.request_root(response)
    typed = type(root).model_validate(wire)
    return typed if root is response else response.model_copy(update={"root": typed})


def _initialize_fields(response: object) -> dict[str, Any]:
    """protocolVersion and serverInfo of a typed InitializeResult (no full dump needed)."""
    result = v1_requests.request_root(response)
    info = getattr(result, "serverInfo", None)
    return {
        "protocolVersion": getattr(result, "protocolVersion", None),
        "serverInfo": {"name": getattr(info, "name", None)},
    }


def _header_protocol_version(responder: Any) -> str | None:
    request = getattr(getattr(responder, "message_metadata", None), "request_context", None)
    headers = getattr(request, "headers", None)
    value = headers.get(_PROTOCOL_VERSION_HEADER) if headers is not None else None
    return value[:64] if isinstance(value, str) and value else None


def _ambient_link(parent: Context | None, ambient: Context | None) -> list[Link]:
    """Semconv: parent on `_meta`, and link the transport's (HTTP) context when both exist."""
    if parent is None or ambient is None:
        return []
    parent_context = trace.get_current_span(parent).get_span_context()
    ambient_context = trace.get_current_span(ambient).get_span_context()
    if ambient_context.span_id == parent_context.span_id:
        return []
    return [Link(ambient_context)]


def _attach(context: Context) -> object | None:
    try:
        return otel_context.attach(context)
    except Exception:
        return None


def _detach(token: object | None) -> None:
    if token is None:
        return
    try:
        otel_context.detach(token)  # type: ignore[arg-type]
    except Exception:
        _logger.debug("mcp-tokens could not detach its context", exc_info=True)


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)
