# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Patches for the MCP Python SDK 1.x (1.23 and later), client and server side.

mcp 1.x emits no spans, so this module creates them per the MCP semantic conventions:
CLIENT spans for requests this process sends (`v1_client`) and SERVER spans for requests it
receives (`v1_server`), with W3C trace context and baggage in `params._meta`
(`propagation`). Every exchange carries the wire JSON to the pipeline, which counts it
off the caller's path. Session durations come from `v1_sessions`, network attributes and
transport session ids from `transports`. FastMCP (bundled) and standalone fastmcp 3 sit
on the same SDK classes and are covered by the same patches.

Patch points (mcp 1.30.0 line numbers; the same signatures since 1.23):
- `mcp.shared.session.BaseSession.send_request` (shared/session.py:240), `._handle_response`
  (:481), `.__aenter__` (:221), `.__aexit__` (:227); `RequestResponder.respond` (:119);
- `mcp.server.lowlevel.server.Server._handle_request` (server/lowlevel/server.py:725);
- `mcp.server.session.ServerSession._received_request` (server/session.py:175),
  `mcp.client.session.ClientSession._received_request` (client/session.py:570);
- transports: `mcp.client.stdio.stdio_client` (client/stdio/__init__.py:106),
  `mcp.client.sse.sse_client` (client/sse.py:35),
  `mcp.client.streamable_http.StreamableHTTPTransport.post_writer` (:542),
  `mcp.server.stdio.stdio_server` (server/stdio.py:34),
  `mcp.server.sse.SseServerTransport.connect_sse` (server/sse.py:141),
  `mcp.server.streamable_http.StreamableHTTPServerTransport.connect` (:1024); the module
  functions also where `mcp`, the bundled FastMCP and fastmcp 3 re-export them by name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Tracer

from .transports import PatchPoint, TransportPatches, TransportRegistry
from .v1_client import OutgoingRequests
from .v1_sdk import SdkV1, load_sdk
from .v1_server import IncomingRequests
from .v1_sessions import SessionTracker
from .versions import MIN_V1, installed_mcp_version
from .wrapping import PatchSet, Wrapper, wrap_everywhere

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)


# The wrappers installed on the SDK can outlive an uninstrument(): a module that imported a
# wrapped function by name keeps it, and a later instrument() installs new wrappers next to
# it. So every installed wrapper is a trampoline that calls the handler of whichever patcher
# is active now, and the original when none is.
_active_handlers: dict[str, Wrapper] = {}


def _trampoline(key: str) -> Wrapper:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        handler = _active_handlers.get(key)
        if handler is None:
            return wrapped(*args, **kwargs)
        return handler(wrapped, instance, args, kwargs)

    return wrapper


class McpV1Patcher:
    """Applies and removes every mcp 1.x patch; see the module docstring for the list."""

    def __init__(self, pipeline: Pipeline, tracer: Tracer, guard: Guard | None = None) -> None:
        self._pipeline = pipeline
        self._tracer = tracer
        self._guard = guard
        self._patches = PatchSet()
        self._handlers: dict[str, Wrapper] = {}
        # Calls already inside a handler when unpatch() runs finish without recording.
        self._on = False

    def is_on(self) -> bool:
        return self._on

    def patch(self) -> None:
        version = installed_mcp_version()
        if version is None or version[0] != 1 or version < MIN_V1:
            raise RuntimeError(
                f"mcp-tokens' 1.x patches need mcp >= {MIN_V1[0]}.{MIN_V1[1]}, < 2; found mcp {version}"
            )
        sdk = load_sdk()
        try:
            for point in self._points(sdk):
                key = _key(point.owner, point.name)
                self._handlers[key] = point.handler
                wrap_everywhere(self._patches, point.owner, point.name, _trampoline(key))
        except BaseException:
            self._patches.restore()
            self._handlers.clear()
            raise
        self._on = True
        _active_handlers.update(self._handlers)
        _logger.debug("mcp-tokens applied %d mcp 1.x patches", len(self._patches))

    def unpatch(self) -> None:
        self._on = False
        for key, handler in self._handlers.items():
            if _active_handlers.get(key) is handler:
                del _active_handlers[key]
        self._handlers.clear()
        self._patches.restore()

    def _points(self, sdk: SdkV1) -> list[PatchPoint]:
        registry = TransportRegistry()
        sessions = SessionTracker(self._pipeline, sdk, registry, self.is_on)
        outgoing = OutgoingRequests(
            self._pipeline, self._tracer, sdk, sessions, self.is_on, guard=self._guard
        )
        incoming = IncomingRequests(
            self._pipeline, self._tracer, sdk, sessions, self.is_on, guard=self._guard
        )
        return [
            PatchPoint(sdk.BaseSession, "send_request", outgoing.send_request),
            PatchPoint(sdk.BaseSession, "_handle_response", outgoing.handle_response),
            PatchPoint(sdk.BaseSession, "__aenter__", sessions.enter),
            PatchPoint(sdk.BaseSession, "__aexit__", sessions.exit),
            PatchPoint(sdk.RequestResponder, "respond", incoming.respond),
            PatchPoint(sdk.Server, "_handle_request", incoming.handle_request),
            PatchPoint(sdk.ServerSession, "_received_request", incoming.server_received_request),
            PatchPoint(sdk.ClientSession, "_received_request", incoming.client_received_request),
            *TransportPatches(registry, self.is_on).points(sdk),
        ]

    @property
    def patch_count(self) -> int:
        return len(self._patches)


def _key(owner: Any, name: str) -> str:
    """A stable name for a patch point across patchers: `module.Class.attribute`."""
    qualname = getattr(owner, "__qualname__", getattr(owner, "__name__", repr(owner)))
    return f"{getattr(owner, '__module__', '')}.{qualname}.{name}"
