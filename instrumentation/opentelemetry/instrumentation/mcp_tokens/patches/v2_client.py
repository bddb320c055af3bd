# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x client side: one `Exchange` per request a dispatcher sends, on one CLIENT span.

Every request a 2.x peer sends goes through its dispatcher's `send_raw_request`, which
returns the raw wire result dict: `JSONRPCDispatcher` for every stream transport,
`DirectDispatcher` for the in-process 2026-07-28 path. Wrapping those (rather than the
`ClientSession.send_request` funnel) also covers `send_discover`, which bypasses the
funnel, and the server's own requests to its client (sampling/createMessage), which the
server's dispatcher sends. Results stay on the wrapper's call object, never in a context
variable alone (in memory the server runs in the client's context); a ClientSession is
found from its dispatcher, registered when the session is built.

Spans: `JSONRPCDispatcher` opens `MCP send {method} {target}` through the module global
`otel_span`; while our wrapper runs, our replacement opens that very span with
`end_on_exit=False` (adoption), and the call renames it to the semconv name, adds what the
SDK misses and hands it to the pipeline. `DirectDispatcher` has no span: we open the
CLIENT span. Its peer's handler runs in the caller's context, so the server's span nests
under ours without `_meta`; only a budget scope the application chose goes into a copy of
`params._meta` (as baggage, as the JSON-RPC path sends it), because the server reads the
scope from there. The requests the client answers are in `v2_answers`.
"""

from __future__ import annotations

import functools
import logging
import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Span, SpanKind, Tracer
from opentelemetry.util.types import AttributeValue

from .guarding import guarded
from .propagation import explicit_budget_scope, inject_meta
from .v2_answers import AnswerHooks
from .v2_client_call import ClientCall, CurrentSpan, Reporter, SessionInfo, server_name_of
from .v2_common import (
    as_mapping,
    import_optional,
    meta_of,
    protocol_version_in,
    reset_quietly,
    resource_uri_of,
    safely,
    target_of,
)
from .v2_server import LoopSession
from .v2_server_call import current_server_call
from .v2_spans import Adoption, Handoff, adopting_otel_span
from .v2_transport import CLIENT_TRANSPORT, NO_TRANSPORT
from .wrapping import PatchSet

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)

Wrapped = Callable[..., Any]

# The call whose `send_raw_request` is running in this context, until the SDK opens its span.
_PENDING: ContextVar[ClientCall | None] = ContextVar("mcp_tokens_v2_client_call", default=None)


class _Pending:
    """Names the call in `_PENDING` while the SDK opens its span (for `_claim_span`)."""

    __slots__ = ("_call", "_token")

    def __init__(self, call: ClientCall) -> None:
        self._call = call

    def __enter__(self) -> None:
        self._token = _PENDING.set(self._call)

    def __exit__(self, *exc_info: object) -> None:
        reset_quietly(_PENDING, self._token)


class ClientHooks:
    def __init__(
        self,
        pipeline: Pipeline,
        tracer: Tracer,
        modern_versions: frozenset[str],
        mcp_error: Any,
        server_loop: Callable[[Any], LoopSession | None] = lambda dispatcher: None,
        *,
        guard: Guard | None = None,
    ) -> None:
        self._pipeline = pipeline
        self._guard = guard
        self._server_loop = server_loop
        self._modern_versions = modern_versions
        self._reporter = Reporter(pipeline, tracer, mcp_error)
        self._sessions: WeakKeyDictionary[Any, SessionInfo] = WeakKeyDictionary()
        self._dispatchers: WeakKeyDictionary[Any, SessionInfo] = WeakKeyDictionary()
        self._answers = AnswerHooks(self._reporter, self._sessions)

    def patch(self, patches: PatchSet, dispatcher_module: Any, session_class: Any) -> None:
        patches.wrap(
            dispatcher_module.JSONRPCDispatcher,
            "send_raw_request",
            functools.partial(self._send, direct=False),
        )
        patches.wrap(session_class, "__init__", self._register_session)
        sdk_otel = import_optional("mcp.shared._otel")
        if getattr(sdk_otel, "_tracer", None) is not None and "otel_span" in vars(dispatcher_module):
            adopting = adopting_otel_span(dispatcher_module.otel_span, sdk_otel, self._claim_span)
            patches.replace(dispatcher_module, "otel_span", adopting)
        direct = getattr(import_optional("mcp.shared.direct_dispatcher"), "DirectDispatcher", None)
        if direct is not None and "send_raw_request" in vars(direct):
            patches.wrap(direct, "send_raw_request", functools.partial(self._send, direct=True))
        for name, wrapper in (
            ("__aenter__", self._session_entered),
            ("__aexit__", self._session_exited),
            ("_on_request", self._answers.answer_back_channel),
            ("dispatch_input_request", self._answers.answer_input_request),
        ):
            if name in vars(session_class):
                patches.wrap(session_class, name, wrapper)

    # --- sessions ----------------------------------------------------------------------
    def _register_session(
        self, wrapped: Wrapped, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        wrapped(*args, **kwargs)
        try:
            info = SessionInfo(weakref.ref(session), CLIENT_TRANSPORT.get() or NO_TRANSPORT)
            self._sessions[session] = info
            dispatcher = getattr(session, "_dispatcher", None)
            if dispatcher is not None:
                self._dispatchers[dispatcher] = info
        except Exception:
            _logger.debug("mcp-tokens could not follow a ClientSession", exc_info=True)

    async def _session_entered(
        self, wrapped: Wrapped, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        info = self._sessions.get(session)
        if info is not None:
            info.started = time.monotonic()
        return await wrapped(*args, **kwargs)

    async def _session_exited(
        self, wrapped: Wrapped, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            safely(self._record_session, session, args[0] if args else None)

    def _record_session(self, session: Any, exc_type: type[BaseException] | None) -> None:
        info = self._sessions.get(session)
        if info is None or info.started is None:
            return
        version = getattr(session, "protocol_version", None)
        if not isinstance(version, str) or version in self._modern_versions:
            return  # never handshaken, or 2026-07-28: no session
        attributes: dict[str, AttributeValue] = {
            **info.transport.metric,
            semconv.MCP_PROTOCOL_VERSION: version,
        }
        if exc_type is not None:
            attributes[semconv.ERROR_TYPE] = exc_type.__qualname__
        self._pipeline.recorder.record_session(Side.CLIENT, time.monotonic() - info.started, attributes)

    # --- requests ----------------------------------------------------------------------
    async def _send(
        self,
        wrapped: Wrapped,
        dispatcher: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        *,
        direct: bool,
    ) -> Any:
        """Either dispatcher's `send_raw_request`; the result the application gets is the
        guard's, when one is on. It awaits the SDK itself: a coroutine of ours in between would
        be passed through at every suspension of every request."""
        call = safely(self._begin, dispatcher, args, kwargs)
        if call is None:
            return await wrapped(*args, **kwargs)
        scope: AbstractContextManager[None]
        if direct:
            # In-process dispatch opens no span: ours, current while the peer's handler runs.
            span = safely(self._reporter.open_span, call, SpanKind.CLIENT, None)
            context = None if span is None else trace.set_span_in_context(span)
            if call.explicit_scope is not None:
                args, kwargs = safely(_inject, call, context, args, kwargs) or (args, kwargs)
            scope = CurrentSpan(span, context)
        else:
            scope = _Pending(call)  # the SDK opens its CLIENT span inside; _claim_span adopts it
        try:
            with scope:
                try:
                    result = await wrapped(*args, **kwargs)
                except BaseException as exc:
                    safely(self._reporter.failed, call, exc)
                    raise
                if self._guard is not None:
                    result = self._guarded(call, result)
                safely(self._reporter.succeeded, call, result)
                return result
        finally:
            self._close(call)

    def _close(self, call: ClientCall) -> None:
        """Hand the call over, once its span is no longer the current one."""
        safely(self._reporter.close, call)
        call.handoff.abandon()  # only acts when close failed before submitting

    def _guarded(self, call: ClientCall, result: object) -> object:
        """The raw result after the guard: what the application receives (the client's own
        requests only; a server's requests to its client are not tool results)."""
        exchange = call.exchange
        if exchange.side is not Side.CLIENT:
            return result
        uri = safely(resource_uri_of, exchange.method, exchange.request)
        return guarded(self._guard, result, exchange, owns_scope=True, span=call.handoff.span, uri=uri)

    def _begin(self, dispatcher: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> ClientCall:
        method = args[0] if args else kwargs["method"]
        params = args[1] if len(args) > 1 else kwargs.get("params")
        info = self._dispatchers.get(dispatcher)
        side, server_name, budget = Side.CLIENT, None, None
        metric: dict[str, AttributeValue] = {}
        span_attributes: dict[str, AttributeValue] = {}
        version: object = None
        explicit = explicit_budget_scope()
        server = current_server_call() if info is None else None
        loop = self._server_loop(dispatcher) if info is None and server is None else None
        if server is not None:
            # The server's own request to its client (sampling/createMessage...): reported by
            # the server, measured as the sender's (client) operation. Only the transport
            # facts go on the span: its peer is the MCP client.
            side, server_name, version = Side.SERVER, server.exchange.server_name, server.ctx.protocol_version
            metric.update(server.transport.metric)
            span_attributes.update(server.transport.metric)
        elif loop is not None:  # the server's own request outside any request it serves
            side, server_name = Side.SERVER, loop.server_name
            metric.update(loop.transport.metric)
            span_attributes.update(loop.transport.metric)
        elif info is not None:
            session = info.session()
            server_name = info.server_name or server_name_of(session)
            budget = explicit or BudgetRef(info.key)
            version = getattr(session, "protocol_version", None) or protocol_version_in(method, params, None)
            metric.update(info.transport.metric)
            span_attributes.update(info.transport.span)
        else:
            budget = explicit
        if isinstance(version, str):
            metric[semconv.MCP_PROTOCOL_VERSION] = span_attributes[semconv.MCP_PROTOCOL_VERSION] = version
        exchange = Exchange(
            side=side,
            method=method,
            request=params,
            target=target_of(method, params),
            server_name=server_name,
            budget=budget,
            metric_attributes=metric,
        )
        exchange.operation_side = Side.CLIENT
        call = ClientCall(exchange, Handoff(self._pipeline, exchange), info=info)
        call.span_attributes = span_attributes
        call.explicit_scope = explicit
        return call

    # --- the SDK's CLIENT span ---------------------------------------------------------
    @staticmethod
    def _claim_span(kind: SpanKind, parent: object) -> Adoption | None:
        call = _PENDING.get()
        if call is None or call.claimed or kind is not SpanKind.CLIENT:
            return None
        # Claimed at once: no await separates the wrapper from this call, so the request it
        # belongs to is this context's own (a server running in memory inherits the slot,
        # already claimed).
        call.claimed = True
        return Adoption(call.handoff, adopt=lambda span, attributes: _adopt(call, span, attributes))


def _adopt(call: ClientCall, span: Span, attributes: object) -> None:
    call.handoff.attach(span, owns_end=True)
    call.request_id = as_mapping(attributes).get(semconv.JSONRPC_REQUEST_ID)


def _inject(
    call: ClientCall, context: otel_context.Context | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Add `context`'s propagation fields (the budget scope's baggage among them) to a copy of
    the params' `_meta`."""
    if context is None:
        return args, kwargs
    params = as_mapping(args[1] if len(args) > 1 else kwargs.get("params"))
    new_params = {**params, "_meta": inject_meta(meta_of(params), context, call.explicit_scope)}
    call.exchange.request = new_params
    if len(args) > 1:
        return (args[0], new_params, *args[2:]), kwargs
    return args, {**kwargs, "params": new_params}
