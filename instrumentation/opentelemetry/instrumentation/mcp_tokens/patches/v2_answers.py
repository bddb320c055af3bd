# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x client side: the requests a server sends its client, answered by the client.

Handshake-era servers send them over the back-channel: `ClientSession._on_request(dctx,
method, params)` receives the raw params and returns the wire dict. On 2026-07-28 they
travel inside an `InputRequiredResult` and the client serves them with
`dispatch_input_request(ctx, request)` between two rounds of the call (which the legacy
path also calls, inside `_on_request`: a context variable keeps it from counting twice).
The SDK has no span for either: the client, receiving the request, opens a SERVER span,
parented by the `_meta` trace context or by the call that asked for input.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.trace import NonRecordingSpan, SpanKind
from opentelemetry.util.types import AttributeValue

from .propagation import extract_parent
from .v2_client_call import INPUT_PARENT, ClientCall, CurrentSpan, Reporter, SessionInfo, server_name_of
from .v2_common import meta_of, reset_quietly, safely
from .v2_spans import Handoff

Wrapped = Callable[..., Any]

_ANSWERING: ContextVar[bool] = ContextVar("mcp_tokens_v2_answering", default=False)


class AnswerHooks:
    def __init__(self, reporter: Reporter, sessions: WeakKeyDictionary[Any, SessionInfo]) -> None:
        self._reporter = reporter
        self._sessions = sessions

    async def answer_back_channel(
        self, wrapped: Wrapped, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """`ClientSession._on_request(dctx, method, params)`: the raw params in, the wire dict out."""
        dctx = args[0] if args else kwargs.get("dctx")
        method = args[1] if len(args) > 1 else kwargs.get("method")
        params = args[2] if len(args) > 2 else kwargs.get("params")
        call = safely(self._begin, session, method, params, getattr(dctx, "request_id", None), None)
        token = _ANSWERING.set(True)
        try:
            return await self._run(call, self._reporter.succeeded, wrapped, args, kwargs)
        finally:
            reset_quietly(_ANSWERING, token)

    async def answer_input_request(
        self, wrapped: Wrapped, session: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        """`dispatch_input_request(ctx, request)` outside the back-channel: 2026-07-28 inputRequests."""
        if _ANSWERING.get():
            return await wrapped(*args, **kwargs)
        request = args[1] if len(args) > 1 else kwargs.get("request")
        call = safely(self._begin_input_request, session, request)
        return await self._run(call, self._input_answered, wrapped, args, kwargs)

    async def _run(
        self,
        call: ClientCall | None,
        succeeded: Callable[[ClientCall, Any], None],
        wrapped: Wrapped,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if call is None:
            return await wrapped(*args, **kwargs)
        try:
            with CurrentSpan(call.handoff.span):
                result = await wrapped(*args, **kwargs)
        except BaseException as exc:
            safely(self._reporter.failed, call, exc)
            raise
        else:
            safely(succeeded, call, result)
            return result
        finally:
            safely(self._reporter.close, call)
            call.handoff.abandon()  # only acts when close failed before submitting

    def _begin(
        self,
        session: Any,
        method: object,
        params: object,
        request_id: object,
        parent: otel_context.Context | None,
    ) -> ClientCall | None:
        if not isinstance(method, str):
            return None
        info = self._sessions.get(session)
        metric: dict[str, AttributeValue] = dict(info.transport.metric) if info is not None else {}
        version = getattr(session, "protocol_version", None)
        if isinstance(version, str):
            metric[semconv.MCP_PROTOCOL_VERSION] = version
        exchange = Exchange(
            side=Side.CLIENT,
            method=method,
            request=params,
            server_name=(info.server_name if info is not None else None) or server_name_of(session),
            metric_attributes=metric,
        )
        exchange.operation_side = Side.SERVER  # the client is this request's receiver
        call = ClientCall(exchange, Handoff(self._reporter.pipeline, exchange), info=info)
        call.request_id, call.receiver = request_id, True
        if isinstance(version, str):
            call.span_attributes[semconv.MCP_PROTOCOL_VERSION] = version
        self._reporter.open_span(call, SpanKind.SERVER, parent or extract_parent(meta_of(params)))
        return call

    def _begin_input_request(self, session: Any, request: Any) -> ClientCall | None:
        params = getattr(request, "params", None)
        # The typed request re-dumped as the SDK dumps it: the wire form of an embedded request.
        wire = (
            params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else None
        )
        parent = extract_parent(meta_of(wire))
        asked_by = INPUT_PARENT.get()
        if parent is None and asked_by is not None:
            parent = trace.set_span_in_context(NonRecordingSpan(asked_by))
        return self._begin(session, getattr(request, "method", None), wire, None, parent)

    def _input_answered(self, call: ClientCall, result: Any) -> None:
        code = getattr(result, "code", None)
        if type(result).__name__ == "ErrorData" and isinstance(code, int):
            call.exchange.finish(None, str(code))  # the callback declined
            call.exchange.metric_attributes[semconv.RPC_RESPONSE_STATUS_CODE] = str(code)
            return
        dump = getattr(result, "model_dump", None)
        wire = dump(by_alias=True, mode="json", exclude_none=True) if dump is not None else result
        self._reporter.succeeded(call, wire)
