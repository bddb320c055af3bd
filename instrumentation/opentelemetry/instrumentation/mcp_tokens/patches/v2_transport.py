# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Which transport an mcp 2.x session runs on: the semconv `network.*` and `server.*` facts.

Neither `ClientSession` nor `ServerRunner` knows its transport, but every transport is
opened by an async context manager (`stdio_client`, `sse_client`,
`streamable_http_client`, `stdio_server`) in the task that then builds the session. We
wrap those functions so that, while their block is open, a context variable says what
they are; the client session reads it when it is built, the server's handlers inherit it.
HTTP servers need none of this: each request carries its starlette `Request`.

The functions are imported by name all over the SDK, fastmcp and applications, so the
patch covers their home module and every loaded module whose global of that name is the
same object (a module that imports one after `instrument()` gets the wrapper anyway). An
application module that imported one under another name before `instrument()` keeps the
original: its sessions carry no network attributes. `unpatch()` restores them all.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType, TracebackType
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.util.types import AttributeValue

from . import spans
from .v2_common import reset_quietly
from .wrapping import PatchSet, wrap_everywhere

_logger = logging.getLogger(__name__)

TRANSPORT_PIPE = "pipe"
TRANSPORT_TCP = "tcp"
PROTOCOL_HTTP = "http"


class TransportInfo(NamedTuple):
    """Semconv facts about one connection: all go on spans, `metric` on the duration metrics."""

    span: Mapping[str, AttributeValue] = MappingProxyType({})
    metric: Mapping[str, AttributeValue] = MappingProxyType({})


NO_TRANSPORT = TransportInfo()
PIPE = TransportInfo(
    span={semconv.NETWORK_TRANSPORT: TRANSPORT_PIPE}, metric={semconv.NETWORK_TRANSPORT: TRANSPORT_PIPE}
)

CLIENT_TRANSPORT: ContextVar[TransportInfo | None] = ContextVar(
    "mcp_tokens_v2_client_transport", default=None
)
SERVER_TRANSPORT: ContextVar[TransportInfo | None] = ContextVar(
    "mcp_tokens_v2_server_transport", default=None
)


def http_client_transport(url: object, protocol_version: str | None = None) -> TransportInfo:
    """What a client knows of an HTTP server from its URL (semconv `server.address`/`port`)."""
    attributes: dict[str, AttributeValue] = {
        semconv.NETWORK_TRANSPORT: TRANSPORT_TCP,
        semconv.NETWORK_PROTOCOL_NAME: PROTOCOL_HTTP,
    }
    if protocol_version:
        attributes[semconv.NETWORK_PROTOCOL_VERSION] = protocol_version
    if isinstance(url, str):
        parts = urlsplit(url)
        if parts.hostname:
            attributes[semconv.SERVER_ADDRESS] = parts.hostname
            port = parts.port or (443 if parts.scheme == "https" else 80)
            attributes[semconv.SERVER_PORT] = port
    return TransportInfo(span=attributes, metric=attributes)


def http_server_transport(request: object) -> TransportInfo:
    """What a server knows of an HTTP request (a starlette `Request`): protocol and client."""
    span = spans.http_request_attributes(request)
    metric = {key: value for key, value in span.items() if key in spans.METRIC_NETWORK_KEYS}
    return TransportInfo(span=span, metric=metric)


class _TransportBlock:
    """An async context manager that marks its block with a transport while delegating."""

    def __init__(self, manager: Any, variable: ContextVar[TransportInfo | None], info: TransportInfo) -> None:
        self._manager = manager
        self._variable = variable
        self._info = info
        self._token: Token[TransportInfo | None] | None = None

    async def __aenter__(self) -> Any:
        self._token = self._variable.set(self._info)
        try:
            return await self._manager.__aenter__()
        except BaseException:
            self._reset()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Any:
        try:
            return await self._manager.__aexit__(exc_type, exc, tb)
        finally:
            self._reset()

    def _reset(self) -> None:
        token, self._token = self._token, None
        if token is not None:
            reset_quietly(self._variable, token)


def _marking(
    variable: ContextVar[TransportInfo | None],
    describe: Callable[[tuple[Any, ...], dict[str, Any]], TransportInfo],
) -> Callable[[Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        manager = wrapped(*args, **kwargs)
        try:
            return _TransportBlock(manager, variable, describe(args, kwargs))
        except Exception:
            _logger.debug("mcp-tokens could not describe a transport", exc_info=True)
            return manager

    return wrapper


def _url_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
    return args[0] if args else kwargs.get("url")


# (home module, function name, context variable, describe(args, kwargs))
_TRANSPORT_FUNCTIONS: tuple[
    tuple[
        str, str, ContextVar[TransportInfo | None], Callable[[tuple[Any, ...], dict[str, Any]], TransportInfo]
    ],
    ...,
] = (
    ("mcp.client.stdio", "stdio_client", CLIENT_TRANSPORT, lambda args, kwargs: PIPE),
    (
        "mcp.client.sse",
        "sse_client",
        CLIENT_TRANSPORT,
        lambda a, k: http_client_transport(_url_of(a, k), "1.1"),
    ),
    (
        "mcp.client.streamable_http",
        "streamable_http_client",
        CLIENT_TRANSPORT,
        lambda a, k: http_client_transport(_url_of(a, k)),
    ),
    ("mcp.server.stdio", "stdio_server", SERVER_TRANSPORT, lambda args, kwargs: PIPE),
)


def patch_transports(patches: PatchSet) -> None:
    """Mark the blocks of the SDK's transport functions (optional: skipped when absent)."""
    for module_name, name, variable, describe in _TRANSPORT_FUNCTIONS:
        home = sys.modules.get(module_name)
        if home is None:
            try:
                home = __import__(module_name, fromlist=[name])
            except ImportError:
                continue
        if vars(home).get(name) is None:
            continue
        try:
            wrap_everywhere(patches, home, name, _marking(variable, describe))
        except Exception:
            _logger.debug("mcp-tokens could not patch %s.%s", module_name, name, exc_info=True)
