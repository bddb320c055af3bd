# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x server side: one `Exchange` per inbound request, on the SDK's or fastmcp's span.

Every inbound message of every transport runs `ServerRunner._on_request`, which composes
`Server.middleware` around an `inner` callable with `_compose_server_middleware(inner)`;
`inner(ctx)` returns the wire dict (`ServerRunner._serialize`). We wrap that method and:

- around the whole chain, open a `ServerCall` (context variable) for the request;
- replace `inner` by a wrapper, the innermost link, that records the wire dict or the
  exception it raised;
- adopt the SDK's SERVER span (`OpenTelemetryMiddleware` opens it through the module
  global `mcp.server._otel.otel_span`, which we replace) or, where fastmcp 4 removed that
  middleware, defer the end of its seam span found current in `inner`;
- when that span's block ends, add the semconv attributes the SDK misses and hand span
  and exchange to the pipeline, which ends the span at the original time.

Budget scope: the W3C baggage scope in `_meta`, else the stateful-HTTP session id, else
one scope per loop connection (stdio, SSE, in-memory); 2026-07-28 and stateless requests
have no session, so only baggage gives them a budget. Loop connections are also sessions
for `mcp.server.session.duration`. The synthetic `tools/list` that modern HTTP runs before
a `tools/call` (to validate `Mcp-Param-*` headers) is not an exchange.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from opentelemetry import context as otel_context
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef
from opentelemetry.trace import Link, SpanKind, get_current_span
from opentelemetry.util.types import AttributeValue

from .guarding import guarded
from .propagation import budget_scope_of
from .v2_common import import_optional, meta_of, reset_quietly, resource_uri_of, safely, target_of
from .v2_server_call import CURRENT_CALL, ServerCall
from .v2_spans import Adoption, adopting_otel_span
from .v2_transport import (
    NO_TRANSPORT,
    SERVER_TRANSPORT,
    TransportInfo,
    http_server_transport,
)
from .wrapping import PatchSet

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[Any]]

_SYNTHETIC: ContextVar[bool] = ContextVar("mcp_tokens_v2_synthetic_listing", default=False)


class LoopSession:
    """A handshake-era loop connection (stdio, SSE, stateful HTTP, in-memory): a session."""

    __slots__ = ("key", "served", "server_name", "started", "transport")

    def __init__(self) -> None:
        self.key = uuid.uuid4().hex
        self.started = time.monotonic()
        self.transport = NO_TRANSPORT
        self.server_name: str | None = None
        self.served = False


class ServerHooks:
    def __init__(
        self, pipeline: Pipeline, modern_versions: frozenset[str], mcp_error: Any, guard: Guard | None = None
    ) -> None:
        self._pipeline = pipeline
        self._guard = guard
        self._modern_versions = modern_versions
        self._mcp_error = mcp_error
        self._loops: WeakKeyDictionary[Any, LoopSession] = WeakKeyDictionary()
        # A loop connection's dispatcher -> its session: requests the server sends on it
        # outside any request it serves (a keep-alive ping) are still the server's.
        self._outbound: WeakKeyDictionary[Any, LoopSession] = WeakKeyDictionary()

    def loop_of(self, dispatcher: Any) -> LoopSession | None:
        """The server loop connection that sends through `dispatcher`, if any."""
        try:
            return self._outbound.get(dispatcher)
        except TypeError:  # not weak-referenceable: not one of ours
            return None

    # --- patching --------------------------------------------------------------------
    def patch(self, patches: PatchSet, runner_module: Any) -> None:
        patches.wrap(runner_module.ServerRunner, "_compose_server_middleware", self._compose)
        self._patch_optional(patches, runner_module)

    def _patch_optional(self, patches: PatchSet, runner_module: Any) -> None:
        otel_module = import_optional("mcp.server._otel")
        tracer = getattr(import_optional("mcp.shared._otel"), "_tracer", None)
        if otel_module is not None and tracer is not None and "otel_span" in vars(otel_module):
            adopting = adopting_otel_span(
                otel_module.otel_span, import_optional("mcp.shared._otel"), self._claim_span
            )
            patches.replace(otel_module, "otel_span", adopting)
        modern = import_optional("mcp.server._streamable_http_modern")
        if modern is not None and "_tool_input_schema" in vars(modern):
            patches.wrap(modern, "_tool_input_schema", _flag_synthetic_listing)
        connection_class = getattr(import_optional("mcp.server.connection"), "Connection", None)
        if connection_class is not None and "for_loop" in vars(connection_class):
            patches.wrap(connection_class, "for_loop", self._register_loop)
            if "aclose_shielded" in vars(runner_module):
                patches.replace(
                    runner_module, "aclose_shielded", self._closing(runner_module.aclose_shielded)
                )

    # --- the middleware chain --------------------------------------------------------
    def _compose(
        self, wrapped: Callable[..., Any], runner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        inner = args[0] if args else kwargs.get("inner")
        if inner is None:
            return wrapped(*args, **kwargs)
        composed = wrapped(self._innermost(runner, inner))
        return self._outermost(runner, composed)

    def _outermost(self, runner: Any, composed: Handler) -> Handler:
        async def call(ctx: Any) -> Any:
            state = self._begin(runner, ctx)
            if state is None:
                return await composed(ctx)
            token = CURRENT_CALL.set(state)
            try:
                return await composed(ctx)
            except BaseException as exc:
                if not state.finished:
                    safely(state.fail, exc)
                raise
            finally:
                reset_quietly(CURRENT_CALL, token)
                safely(state.close)
                state.handoff.abandon()  # only acts when close failed before submitting

        return call

    def _innermost(self, runner: Any, inner: Handler) -> Handler:
        async def call(ctx: Any) -> Any:
            state = CURRENT_CALL.get()
            if state is None or state.runner is not runner or state.inner_started:
                return await inner(ctx)
            safely(state.start_inner)
            try:
                result = await inner(ctx)
            except BaseException as exc:
                safely(state.fail, exc)
                raise
            if self._guard is not None:
                result = self._guarded(state, result)
            safely(state.succeed, result)
            return result

        return call

    def _guarded(self, state: ServerCall, result: object) -> object:
        """The wire result after the guard: what the transport serialises and the exchange counts."""
        exchange = state.exchange
        uri = safely(resource_uri_of, exchange.method, exchange.request)
        return guarded(
            self._guard, result, exchange, owns_scope=state.owns_scope, span=state.handoff.span, uri=uri
        )

    def _begin(self, runner: Any, ctx: Any) -> ServerCall | None:
        """A ServerCall for a request (None for notifications and the synthetic listing)."""
        try:
            if ctx.request_id is None or _SYNTHETIC.get():
                return None
            method, params = ctx.method, ctx.params
            transport = self._transport(runner, ctx)
            metric: dict[str, AttributeValue] = dict(transport.metric)
            if isinstance(ctx.protocol_version, str):
                metric[semconv.MCP_PROTOCOL_VERSION] = ctx.protocol_version
            budget, owns_scope = self._budget(runner, ctx)
            exchange = Exchange(
                side=Side.SERVER,
                method=method,
                request=params,
                target=target_of(method, params),
                server_name=getattr(runner.server, "name", None),
                budget=budget,
                metric_attributes=metric,
            )
            call = ServerCall(
                runner, ctx, exchange, pipeline=self._pipeline, transport=transport, mcp_error=self._mcp_error
            )
            call.owns_scope = owns_scope
            return call
        except Exception:
            _logger.debug("mcp-tokens could not follow a server request", exc_info=True)
            return None

    def _transport(self, runner: Any, ctx: Any) -> TransportInfo:
        request = getattr(ctx, "request", None)
        transport = (
            http_server_transport(request) if request is not None else SERVER_TRANSPORT.get() or NO_TRANSPORT
        )
        loop = self._loops.get(runner.connection)
        if loop is not None and not loop.served:
            loop.served, loop.transport = True, transport
            loop.server_name = getattr(runner.server, "name", None)
        return transport

    def _budget(self, runner: Any, ctx: Any) -> tuple[BudgetRef | None, bool]:
        """The scope a request is charged to, and whether it is this server's own (a
        session or a connection) rather than one its client named."""
        sent = budget_scope_of(meta_of(ctx.params))
        if sent is not None:
            return sent, False
        if ctx.protocol_version in self._modern_versions:
            return None, False  # 2026-07-28 has no session: only the client's baggage names a budget
        connection = runner.connection
        session_id = getattr(connection, "session_id", None)
        if isinstance(session_id, str) and session_id:
            return BudgetRef(session_id), True
        loop = self._loops.get(connection)
        return (BudgetRef(loop.key), True) if loop is not None else (None, False)

    # --- the SDK's SERVER span -------------------------------------------------------
    @staticmethod
    def _claim_span(kind: SpanKind, parent: otel_context.Context | None) -> Adoption | None:
        """The first SERVER span the SDK opens in a request we follow is that request's."""
        state = CURRENT_CALL.get()
        if state is None or kind is not SpanKind.SERVER or not state.claim_span():
            return None
        return Adoption(
            state.handoff,
            adopt=lambda span, attributes: state.adopt(span),
            exited=state.span_exited,
            links=safely(_ambient_links, parent),
        )

    # --- sessions ----------------------------------------------------------------------
    def _register_loop(
        self, wrapped: Callable[..., Any], owner: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        connection = wrapped(*args, **kwargs)
        try:
            loop = self._loops[connection] = LoopSession()
            outbound = args[0] if args else kwargs.get("outbound")
            if outbound is not None:
                self._outbound[outbound] = loop
        except Exception:
            _logger.debug("mcp-tokens could not follow a server connection", exc_info=True)
        return connection

    def _closing(self, original: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        async def aclose_shielded(connection: Any) -> None:
            loop = safely(self._loops.pop, connection, None)
            try:
                await original(connection)
            finally:
                if loop is not None:
                    safely(self._record_session, loop, connection)

        return aclose_shielded

    def _record_session(self, loop: LoopSession, connection: Any) -> None:
        if not loop.served:
            return
        attributes: dict[str, AttributeValue] = dict(loop.transport.metric)
        version = getattr(connection, "protocol_version", None)
        if isinstance(version, str):
            attributes[semconv.MCP_PROTOCOL_VERSION] = version
        self._pipeline.recorder.record_session(Side.SERVER, time.monotonic() - loop.started, attributes)


def _ambient_links(parent: otel_context.Context | None) -> list[Link] | None:
    """A link to the transport's span (e.g. the HTTP server span) when `_meta` named another
    parent: MCP context is independent of transport context, and semconv asks for the link."""
    if parent is None:
        return None
    ambient = get_current_span().get_span_context()
    remote = get_current_span(parent).get_span_context()
    if not ambient.is_valid or ambient.span_id == remote.span_id:
        return None
    return [Link(ambient)]


async def _flag_synthetic_listing(
    wrapped: Callable[..., Awaitable[Any]], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """Runs the SDK's internal tools/list (header validation) marked as not a client's listing."""
    token = _SYNTHETIC.set(True)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        reset_quietly(_SYNTHETIC, token)
