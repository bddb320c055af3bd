# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x (2.0 to 2.3): token telemetry on the SDK's own spans, client and server side.

`McpV2Patcher(pipeline, tracer).patch()` wraps, in the installed SDK:

- client: `JSONRPCDispatcher.send_raw_request` and `DirectDispatcher.send_raw_request`
  (every request, `server/discover` included, with its raw result), `ClientSession`
  construction, entry and exit (server identity, default budget scope, session
  duration), `ClientSession._on_request` and `dispatch_input_request` (the client's
  answers to sampling), and the module global `mcp.shared.jsonrpc_dispatcher.otel_span`
  (to adopt the SDK's CLIENT span); see `v2_client`.
- server: `ServerRunner._compose_server_middleware` (every inbound request and its wire
  result), the module global `mcp.server._otel.otel_span` (to adopt the SDK's SERVER
  span), `_streamable_http_modern._tool_input_schema` (the synthetic listing),
  `Connection.for_loop` and `runner.aclose_shielded` (session duration); see `v2_server`.
- transports: `stdio_client`, `sse_client`, `streamable_http_client`, `stdio_server`
  (network attributes); see `v2_transport`.

The required patch points are checked before anything is touched: if one is missing
(an SDK this module does not know), `patch()` raises and MCP stays as it was. The
others are private or provisional and are skipped when absent. `unpatch()` puts back
every attribute it replaced, the very same objects.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Tracer

from .v2_client import ClientHooks
from .v2_server import ServerHooks
from .v2_transport import patch_transports
from .wrapping import PatchSet

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)

# (module, attribute path) that must exist for the patch to mean anything.
REQUIRED = (
    ("mcp.shared.jsonrpc_dispatcher", "JSONRPCDispatcher.send_raw_request"),
    ("mcp.client.session", "ClientSession.__init__"),
    ("mcp.server.runner", "ServerRunner._compose_server_middleware"),
    ("mcp.shared.exceptions", "MCPError"),
)


class McpV2Patcher:
    def __init__(self, pipeline: Pipeline, tracer: Tracer, guard: Guard | None = None) -> None:
        self._pipeline = pipeline
        self._tracer = tracer
        self._guard = guard
        self._patches = PatchSet()

    def patch(self) -> None:
        modules = _required_modules()
        modern_versions = _modern_versions()
        mcp_error = modules["mcp.shared.exceptions"].MCPError
        try:
            server = ServerHooks(self._pipeline, modern_versions, mcp_error, self._guard)
            server.patch(self._patches, modules["mcp.server.runner"])
            client = ClientHooks(
                self._pipeline, self._tracer, modern_versions, mcp_error, server.loop_of, guard=self._guard
            )
            client.patch(
                self._patches,
                modules["mcp.shared.jsonrpc_dispatcher"],
                modules["mcp.client.session"].ClientSession,
            )
            patch_transports(self._patches)
        except BaseException:
            self._patches.restore()
            raise
        _logger.debug("mcp-tokens patched %d mcp 2.x attributes", len(self._patches))

    def unpatch(self) -> None:
        self._patches.restore()


def _required_modules() -> dict[str, Any]:
    """Import the modules of the required patch points; raise naming the first one missing."""
    modules: dict[str, Any] = {}
    for module_name, path in REQUIRED:
        module = modules.get(module_name) or importlib.import_module(module_name)
        modules[module_name] = module
        owner: Any = module
        for part in path.split("."):
            if part not in vars(owner):
                raise AttributeError(
                    f"mcp-tokens: {module_name}.{path} is missing; this mcp 2.x is not supported"
                )
            owner = vars(owner)[part]
    return modules


def _modern_versions() -> frozenset[str]:
    """The 2026-07-28+ protocol versions (no sessions); empty if the SDK does not list them."""
    try:
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: PLC0415 -- optional in older SDKs
    except ImportError:
        return frozenset()
    return frozenset(MODERN_PROTOCOL_VERSIONS)
