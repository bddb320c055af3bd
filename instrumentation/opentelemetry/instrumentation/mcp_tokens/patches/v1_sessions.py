# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Per-session state of mcp 1.x sessions, and the session-duration metrics.

A 1.x `ClientSession` or `ServerSession` does not keep what telemetry needs (the
server's name on the client, the negotiated protocol version, the requests in flight),
so each session gets a `SessionState` in a weak map, dropped with the session. Wrapping
`BaseSession.__aenter__`/`__aexit__` times every session: `mcp.client.session.duration`
for a ClientSession, `mcp.server.session.duration` for a server connection (stateless
HTTP has no session: it is not recorded).
"""

from __future__ import annotations

import logging
import time
import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline

from . import spans
from .transports import TransportInfo, TransportRegistry

_logger = logging.getLogger(__name__)


class SessionState:
    __slots__ = (
        "__weakref__",
        "_scope",
        "pending",
        "protocol_version",
        "role",
        "server_name",
        "started",
        "stateless",
    )

    def __init__(self, role: Side) -> None:
        self.role = role
        self.server_name: str | None = None
        self.protocol_version: str | None = None
        # Outgoing requests waiting for their response, by JSON-RPC id.
        self.pending: dict[object, Any] = {}
        self.started: float | None = None
        self.stateless = False
        self._scope: str | None = None

    def connection_scope(self) -> str:
        """This session's own budget scope id, made on first use."""
        if self._scope is None:
            self._scope = f"{self.role.value}-session-{uuid.uuid4().hex}"
        return self._scope

    def remember_initialize(self, result: object) -> None:
        """Keep serverInfo.name and protocolVersion from an `initialize` result (wire dict)."""
        if not isinstance(result, Mapping):
            return
        version = result.get("protocolVersion")
        if isinstance(version, str) and version:
            self.protocol_version = version[:64]
        info = result.get("serverInfo")
        name = info.get("name") if isinstance(info, Mapping) else None
        if isinstance(name, str) and name and self.role is Side.CLIENT:
            self.server_name = name


class SessionTracker:
    """The weak session -> SessionState map, and the session lifetime wrappers."""

    def __init__(
        self,
        pipeline: Pipeline,
        sdk: Any,
        transports: TransportRegistry,
        is_on: Callable[[], bool],
    ) -> None:
        self._pipeline = pipeline
        self._sdk = sdk
        self._transports = transports
        self._is_on = is_on
        self._states: weakref.WeakKeyDictionary[Any, SessionState] = weakref.WeakKeyDictionary()

    def role_of(self, session: Any) -> Side | None:
        if isinstance(session, self._sdk.ClientSession):
            return Side.CLIENT
        if isinstance(session, self._sdk.ServerSession):
            return Side.SERVER
        return None

    def state(self, session: Any) -> SessionState:
        state = self._states.get(session)
        if state is None:
            state = SessionState(self.role_of(session) or Side.CLIENT)
            if state.role is Side.SERVER:
                options = getattr(session, "_init_options", None)
                name = getattr(options, "server_name", None)
                state.server_name = name if isinstance(name, str) else None
            self._states[session] = state
        return state

    def find(self, session: Any) -> SessionState | None:
        return self._states.get(session)

    def transport(self, session: Any) -> TransportInfo | None:
        return self._transports.lookup(getattr(session, "_write_stream", None))

    # --- BaseSession.__aenter__ / __aexit__ -------------------------------------------------
    async def enter(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        result = await wrapped(*args, **kwargs)
        if self._is_on():
            try:
                self._started(instance)
            except Exception:
                _logger.debug("mcp-tokens could not start a session timer", exc_info=True)
        return result

    async def exit(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        try:
            return await wrapped(*args, **kwargs)
        finally:
            if self._is_on():
                try:
                    self._ended(instance, args[1] if len(args) > 1 else kwargs.get("exc_val"))
                except Exception:
                    _logger.debug("mcp-tokens could not record a session duration", exc_info=True)

    def _started(self, session: Any) -> None:
        role = self.role_of(session)
        if role is None:
            return
        state = self.state(session)
        state.started = time.perf_counter()
        # A stateless server session starts out initialized: it is one request, not a session.
        initialization = getattr(session, "_initialization_state", None)
        state.stateless = role is Side.SERVER and getattr(initialization, "name", None) == "Initialized"

    def _ended(self, session: Any, error: object) -> None:
        state = self.find(session)
        if state is None or state.started is None or state.stateless:
            return
        duration = time.perf_counter() - state.started
        state.started = None
        attributes: dict[str, Any] = {}
        if state.protocol_version:
            attributes[semconv.MCP_PROTOCOL_VERSION] = state.protocol_version
        info = self.transport(session)
        if info is not None:
            attributes.update(info.attributes(with_server=state.role is Side.CLIENT))
        if isinstance(error, BaseException) and not spans.is_cancellation(error):
            attributes[semconv.ERROR_TYPE] = type(error).__qualname__
        self._pipeline.recorder.record_session(state.role, duration, attributes)
