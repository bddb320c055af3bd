# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Reach an MCP server with the installed SDK (mcp 1.x or 2.x), list its tools, maybe call one.

What the CLI profiles is the wire: each request goes through the SDK session's
`send_request` with a result type that keeps the raw JSON-RPC result (a `RootModel` of a
dict), so the counts see exactly what the server sent, in its key order, not a typed
re-dump (which differs on mcp 2.x). Both SDK lines share this path; only the handshake
and the request models differ (`sdk.py`).

Bounded everywhere: one deadline covers start-up, handshake and listing (`--timeout`),
another the call (`--call-timeout`); pages, tools and listing size are capped (`Limits`).
A stdio server's stderr goes to a temporary file, so its banner does not clutter the
terminal and its last line can explain a crash. Every failure becomes a `CliError` whose
exit code says in which phase it happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import FrameType
from typing import IO, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import anyio

from . import sdk
from .errors import CliError, ExitCode

STDERR_TAIL_BYTES = 4096
CLEANUP_TIMEOUT_S = 5.0
_MIB = 1 << 20


class Transport(str, Enum):
    STDIO = "stdio"
    STREAMABLE_HTTP = "streamable-http"
    SSE = "sse"


@dataclass(frozen=True)
class Target:
    """A server to launch (`command`, stdio) or to reach (`url`, streamable HTTP or SSE)."""

    command: tuple[str, ...] = ()
    url: str | None = None
    transport: Transport = Transport.STDIO
    headers: tuple[tuple[str, str], ...] = ()
    protocol: str = "auto"  # mcp 2.x: "auto" (server/discover, then fallback) or "legacy"

    def describe(self) -> str:
        """How the server is named in output and errors (credentials in a URL are left out)."""
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.username is None and parts.password is None:
                return self.url
            host = parts.hostname or ""
            netloc = f"{host}:{parts.port}" if parts.port is not None else host
            return urlunsplit(parts._replace(netloc=netloc))
        return " ".join(self.command)


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    call_timeout_s: float = 60.0
    max_tools: int = 10_000
    max_pages: int = 1_000
    max_listing_chars: int = 16 * _MIB


@dataclass(frozen=True)
class ServerInfo:
    name: str | None = None
    version: str | None = None
    protocol_version: str | None = None


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CallOutcome:
    call: ToolCall
    result: Mapping[str, Any]


@dataclass(frozen=True)
class Snapshot:
    """What one session saw: the server, its tools as sent (wire dicts, listing order), the call."""

    info: ServerInfo
    tools: tuple[Mapping[str, Any], ...]
    pages: int
    client: str
    call: CallOutcome | None = None


class Progress(Protocol):
    def update(self, message: str) -> None: ...


class _Phase(str, Enum):
    START = "starting the server"
    CONNECT = "connecting"
    HANDSHAKE = "waiting for the MCP handshake"
    LISTING = "listing tools"
    CALLING = "calling the tool"

    @property
    def exit_code(self) -> ExitCode:
        if self in (_Phase.START, _Phase.CONNECT, _Phase.HANDSHAKE):
            return ExitCode.CONNECT
        return ExitCode.CALL_FAILED if self is _Phase.CALLING else ExitCode.LISTING_FAILED


def fetch(target: Target, limits: Limits, progress: Progress, call: ToolCall | None = None) -> Snapshot:
    """Connect, hand-shake, list every tool page and make the optional call; raises `CliError`."""
    sdk.require()
    with _ctrl_c_interrupts():
        return anyio.run(_fetch, target, limits, progress, call)


@contextlib.contextmanager
def _ctrl_c_interrupts() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt wherever the run is. asyncio.run's own handler only
    cancels the main task, and a cancel scope of anyio's that is being exited at that moment
    can take that cancellation for its own: the run then goes on until its deadline."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


class _Session:
    """One run against a server, remembering the phase so a failure can say where it happened."""

    def __init__(self, target: Target, limits: Limits, progress: Progress) -> None:
        self.target = target
        self.limits = limits
        self.progress = progress
        self.phase = _Phase.START if target.url is None else _Phase.CONNECT
        self.stderr: IO[str] | None = None
        self.snapshot: Snapshot | None = None

    def enter(self, phase: _Phase, message: str) -> None:
        self.phase = phase
        self.progress.update(message)

    def failure(self, problem: str, code: ExitCode | None = None) -> CliError:
        message = f"{self.target.describe()}: {problem} while {self.phase.value}"
        tail = self.stderr_tail()
        if tail:
            message += f" (server stderr: {tail})"
        return CliError(code or self.phase.exit_code, message)

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        try:
            self.stderr.flush()
            size = self.stderr.seek(0, os.SEEK_END)
            self.stderr.seek(max(0, size - STDERR_TAIL_BYTES))
            lines = [line.strip() for line in self.stderr.read().splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return lines[-1][:200] if lines else ""


async def _fetch(target: Target, limits: Limits, progress: Progress, call: ToolCall | None) -> Snapshot:
    run = _Session(target, limits, progress)
    with contextlib.ExitStack() as files:
        if target.url is None:
            run.stderr = files.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
        try:
            with anyio.CancelScope() as scope:
                scope.deadline = anyio.current_time() + limits.timeout_s
                await _converse(run, scope, call)
        except Exception as exc:
            if run.snapshot is None:  # an error while closing a finished session changes nothing
                raise _classify(run, exc) from None
        if run.snapshot is None:  # the deadline cancelled the scope before the work was done
            limit = limits.call_timeout_s if run.phase is _Phase.CALLING else limits.timeout_s
            raise run.failure(f"no answer within {limit:g} s")
    return run.snapshot


async def _converse(run: _Session, scope: anyio.CancelScope, call: ToolCall | None) -> None:
    if run.target.url is None:
        run.enter(_Phase.START, f"Starting {run.target.describe()}")
    else:
        run.enter(_Phase.CONNECT, f"Connecting to {run.target.url}")
    async with (
        _streams(run) as (read_stream, write_stream),
        sdk.session(read_stream, write_stream) as session,
    ):
        run.enter(_Phase.HANDSHAKE, "Waiting for the MCP handshake")
        info = ServerInfo(*await sdk.handshake(session, run.target.protocol))
        tools, pages = await _list_tools(run, session)
        outcome = None
        if call is not None:
            scope.deadline = anyio.current_time() + run.limits.call_timeout_s
            run.enter(_Phase.CALLING, f"Calling {call.name}")
            outcome = await _call_tool(run, session, call)
        run.snapshot = Snapshot(info, tools, pages, sdk.client_description(), outcome)
        # Closing the session (and stopping a stdio server) gets its own short deadline; a
        # cancelled close keeps the snapshot.
        scope.deadline = anyio.current_time() + CLEANUP_TIMEOUT_S


@contextlib.asynccontextmanager
async def _streams(run: _Session) -> AsyncIterator[tuple[Any, Any]]:
    target = run.target
    if target.url is None:
        async with sdk.stdio_streams(target.command, run.stderr) as streams:
            yield streams
    elif target.transport is Transport.SSE:
        async with sdk.sse_streams(target.url, dict(target.headers)) as streams:
            yield streams
    else:
        async with sdk.streamable_http_streams(target.url, dict(target.headers)) as streams:
            yield streams


async def _list_tools(run: _Session, session: Any) -> tuple[tuple[Mapping[str, Any], ...], int]:
    tools: list[Mapping[str, Any]] = []
    names: set[str] = set()
    cursors: set[str] = set()
    cursor: str | None = None
    listing_chars = 0
    for page in range(1, run.limits.max_pages + 1):
        run.enter(_Phase.LISTING, f"Listing tools (page {page}, {len(tools)} so far)")
        result = await sdk.list_tools_raw(session, cursor)
        page_tools, cursor = _page(run, result, page)
        for tool in page_tools:
            name = tool["name"]
            if name in names:
                raise run.failure(f"malformed tools/list result: tool {name!r} is listed twice", _MALFORMED)
            names.add(name)
            listing_chars += _definition_chars(run, tool)
        tools.extend(page_tools)
        _check_size(run, len(tools), listing_chars)
        if cursor is None:
            return tuple(tools), page
        if cursor in cursors:
            raise run.failure(
                f"malformed tools/list result: page {page} repeats cursor {cursor!r}", _MALFORMED
            )
        cursors.add(cursor)
    raise run.failure(
        f"tools/list result too large: more than {run.limits.max_pages} pages", ExitCode.LISTING_TOO_LARGE
    )


_MALFORMED = ExitCode.LISTING_MALFORMED


def _page(run: _Session, result: object, page: int) -> tuple[list[Mapping[str, Any]], str | None]:
    """The tools and next cursor of one tools/list page, or a malformed-listing error."""
    if not isinstance(result, Mapping):
        raise run.failure(f"malformed tools/list result: page {page} is not an object", _MALFORMED)
    tools = result.get("tools")
    if not isinstance(tools, list):
        found = type(tools).__name__ if tools is not None else "nothing"
        raise run.failure(f"malformed tools/list result: 'tools' is {found}, not a list", _MALFORMED)
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise run.failure(
                f"malformed tools/list result: tool #{index + 1} of page {page} has no name", _MALFORMED
            )
    cursor = result.get("nextCursor")
    if cursor is not None and not isinstance(cursor, str):
        raise run.failure(f"malformed tools/list result: nextCursor is {type(cursor).__name__}", _MALFORMED)
    return tools, cursor or None


def _definition_chars(run: _Session, tool: Mapping[str, Any]) -> int:
    try:
        return len(json.dumps(tool, separators=(",", ":"), ensure_ascii=False, default=str))
    except (ValueError, RecursionError):
        raise run.failure(
            f"malformed tools/list result: tool {tool['name']!r} is nested too deeply to serialise",
            _MALFORMED,
        ) from None


def _check_size(run: _Session, tools: int, chars: int) -> None:
    limits = run.limits
    if tools > limits.max_tools:
        raise run.failure(
            f"tools/list result too large: {tools:,} tools (limit {limits.max_tools:,})",
            ExitCode.LISTING_TOO_LARGE,
        )
    if chars > limits.max_listing_chars:
        raise run.failure(
            f"tools/list result too large: {chars / _MIB:.1f} MiB of definitions "
            f"(limit {limits.max_listing_chars / _MIB:.0f} MiB)",
            ExitCode.LISTING_TOO_LARGE,
        )


async def _call_tool(run: _Session, session: Any, call: ToolCall) -> CallOutcome:
    result = await sdk.call_tool_raw(session, call.name, dict(call.arguments))
    if not isinstance(result, Mapping):
        raise run.failure("the tools/call result is not an object")
    if result.get("resultType") == "input_required" or "inputRequests" in result:
        raise run.failure(
            "the tool asked the client for input (sampling or elicitation), which mcp-tokens cannot give"
        )
    return CallOutcome(call, result)


def _classify(run: _Session, exc: BaseException) -> CliError:
    """The CliError for an exception an SDK or transport raised in the current phase."""
    leaf = _first_leaf(exc)
    if isinstance(leaf, CliError):
        return leaf
    if isinstance(leaf, OSError) and run.phase is _Phase.START:
        reason = leaf.strerror or str(leaf)
        return run.failure(f"cannot start the command ({reason})")
    if sdk.is_http_error(leaf) and run.phase is _Phase.HANDSHAKE:
        run.phase = _Phase.CONNECT  # HTTP transports connect lazily, on the first request
    problem = sdk.describe_error(leaf)
    if sdk.is_validation_error(leaf):
        if run.phase is _Phase.LISTING:
            return run.failure(f"malformed tools/list result: {problem}", _MALFORMED)
        return run.failure(f"invalid response: {problem}")
    if sdk.is_connection_closed(leaf):
        return run.failure("the server closed the connection (it probably exited)")
    return run.failure(problem)


def _first_leaf(exc: BaseException) -> BaseException:
    """The first non-cancellation exception inside (nested) exception groups."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if not isinstance(leaf, anyio.get_cancelled_exc_class()):
            return leaf
    return leaves[0] if leaves else exc


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    children = getattr(exc, "exceptions", None)
    if isinstance(children, tuple) and children:
        for child in children:
            yield from _leaves(child)
    else:
        yield exc
