# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Which transport carries an mcp 1.x session: network attributes and the session id.

A 1.x session only holds its read/write memory streams, so the transport entry points
(stdio, SSE, streamable HTTP, on both sides) are wrapped to remember, per write stream,
what carries it: `pipe` or `tcp`, the server's address (client side), and the transport
object whose session id a request can read later (the id is only known once `initialize`
has been answered). The map is weak: it forgets a stream with its session. In-memory
sessions have no entry and no network attributes.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.util.types import AttributeValue

from .wrapping import Wrapper

_logger = logging.getLogger(__name__)

PIPE = "pipe"
TCP = "tcp"
HTTP = "http"


@dataclass(frozen=True)
class PatchPoint:
    """An attribute to wrap and the handler its wrapper calls."""

    owner: Any
    name: str
    handler: Wrapper


@dataclass(frozen=True)
class TransportInfo:
    network_transport: str
    protocol_name: str | None = None
    server_address: str | None = None
    server_port: int | None = None
    # The transport object and the attribute holding its MCP session id, read on demand.
    holder: Any = None
    session_attribute: str | None = None

    def session_id(self) -> str | None:
        if self.holder is None or self.session_attribute is None:
            return None
        value = getattr(self.holder, self.session_attribute, None)
        return value if isinstance(value, str) and value else None

    def attributes(self, *, with_server: bool) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {semconv.NETWORK_TRANSPORT: self.network_transport}
        if self.protocol_name:
            attributes[semconv.NETWORK_PROTOCOL_NAME] = self.protocol_name
        if with_server and self.server_address:
            attributes[semconv.SERVER_ADDRESS] = self.server_address
            if self.server_port is not None:
                attributes[semconv.SERVER_PORT] = self.server_port
        return attributes


def http_info(url: object, holder: Any = None, session_attribute: str | None = None) -> TransportInfo:
    address: str | None = None
    port: int | None = None
    if isinstance(url, str):
        try:
            parts = urlsplit(url)
            address = parts.hostname
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            pass
    return TransportInfo(TCP, HTTP, address, port, holder, session_attribute)


class TransportRegistry:
    """Write stream -> TransportInfo, forgotten with the stream."""

    def __init__(self) -> None:
        self._infos: weakref.WeakKeyDictionary[Any, TransportInfo] = weakref.WeakKeyDictionary()

    def register(self, stream: Any, info: TransportInfo) -> None:
        # A stream that is not weak-referenceable gets no attributes rather than a leak.
        with contextlib.suppress(TypeError):
            self._infos[stream] = info

    def lookup(self, stream: Any) -> TransportInfo | None:
        try:
            return self._infos.get(stream)
        except TypeError:
            return None


class _RegisteringContext:
    """Delegates to an async context manager and registers the streams it yields."""

    def __init__(self, inner: Any, register: Callable[[Any], None]) -> None:
        self._inner = inner
        self._register = register

    async def __aenter__(self) -> Any:
        streams = await self._inner.__aenter__()
        try:
            self._register(streams)
        except Exception:
            _logger.debug("mcp-tokens could not register a transport", exc_info=True)
        return streams

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)


class TransportPatches:
    """The wrappers, bound to one registry and one on/off switch."""

    def __init__(self, registry: TransportRegistry, is_on: Callable[[], bool]) -> None:
        self._registry = registry
        self._is_on = is_on

    def points(self, sdk: Any) -> list[PatchPoint]:
        """(owner, attribute, handler, alias modules) of every transport entry point."""
        return [
            PatchPoint(
                sdk.stdio_client_module,
                "stdio_client",
                self._context_wrapper(lambda args, kwargs, instance: TransportInfo(PIPE)),
            ),
            PatchPoint(
                sdk.sse_client_module,
                "sse_client",
                self._context_wrapper(
                    lambda args, kwargs, instance: http_info(_argument(args, kwargs, 0, "url"))
                ),
            ),
            PatchPoint(
                sdk.streamable_http_client_module.StreamableHTTPTransport, "post_writer", self._post_writer
            ),
            PatchPoint(
                sdk.stdio_server_module,
                "stdio_server",
                self._context_wrapper(lambda args, kwargs, instance: TransportInfo(PIPE)),
            ),
            PatchPoint(
                sdk.sse_server_module.SseServerTransport,
                "connect_sse",
                self._context_wrapper(lambda args, kwargs, instance: TransportInfo(TCP, HTTP)),
            ),
            PatchPoint(
                sdk.streamable_http_server_module.StreamableHTTPServerTransport,
                "connect",
                self._context_wrapper(
                    lambda args, kwargs, instance: TransportInfo(
                        TCP, HTTP, holder=instance, session_attribute="mcp_session_id"
                    )
                ),
            ),
        ]

    def _context_wrapper(
        self, describe: Callable[[tuple[Any, ...], dict[str, Any], Any], TransportInfo]
    ) -> Wrapper:
        """A wrapper for an async-context-manager factory yielding (read_stream, write_stream, ...)."""

        def wrapper(
            wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> Any:
            inner = wrapped(*args, **kwargs)
            if not self._is_on():
                return inner

            def register(streams: Any) -> None:
                self._registry.register(streams[1], describe(args, kwargs, instance))

            return _RegisteringContext(inner, register)

        return wrapper

    async def _post_writer(
        self, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if self._is_on():
            try:
                stream = _argument(args, kwargs, 3, "write_stream")
                info = http_info(
                    getattr(instance, "url", None), holder=instance, session_attribute="session_id"
                )
                self._registry.register(stream, info)
            except Exception:
                _logger.debug("mcp-tokens could not register a streamable HTTP client", exc_info=True)
        return await wrapped(*args, **kwargs)


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str) -> Any:
    return args[index] if len(args) > index else kwargs.get(name)
