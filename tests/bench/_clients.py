# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""MCP clients of the instrumented-call benchmark, on either SDK line.

`connect(transport, ...)` yields a `Caller` whose `call_tool(name, arguments)` returns the
text of the result's first content block:
- stdio: a real server subprocess (`python -m tests.bench.instrumented_server`), with or
  without mcp-tokens in it; its stderr goes to a log file, never to a pipe.
- memory: the SDK's in-memory pair in this process: `create_connected_server_and_client_session`
  on mcp 1.x, `mcp.Client(server)` on mcp 2.x (its default in-process dispatcher).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.integration.apps._line import IS_MCP1

from .instrumented_server import INSTRUMENT_ENV, PAYLOAD_DIR_ENV, BenchTelemetry

if IS_MCP1:
    from mcp.shared.memory import create_connected_server_and_client_session
else:
    from mcp import Client

REPO_ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = ("stdio", "memory")
SERVER_MODULE = "tests.bench.instrumented_server"  # the stdio server, run with `python -m`
READ_TIMEOUT_S = 300.0

Caller = Callable[[str, dict[str, Any]], Awaitable[str]]


def _first_text(result: Any) -> str:
    content = getattr(result, "content", None) or []
    return str(getattr(content[0], "text", "")) if content else ""


def _server_env(payload_dir: Path, instrumented: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env[PAYLOAD_DIR_ENV] = str(payload_dir)
    env[INSTRUMENT_ENV] = "1" if instrumented else "0"
    # Only the server subprocess may be instrumented through the environment.
    env.pop("OTEL_PYTHON_DISABLED_INSTRUMENTATIONS", None)
    return env


def _stdio_transport(payload_dir: Path, instrumented: bool, errlog: TextIO) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", SERVER_MODULE],
        env=_server_env(payload_dir, instrumented),
        cwd=str(REPO_ROOT),
    )
    return stdio_client(params, errlog=errlog)


@contextlib.asynccontextmanager
async def connect(
    transport: str,
    *,
    payload_dir: Path,
    server_instrumented: bool,
    memory_server: Any,
    log_path: Path,
) -> AsyncIterator[Caller]:
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown transport {transport!r}; expected one of {TRANSPORTS}")
    with log_path.open("a", encoding="utf-8") as errlog:
        stdio = _stdio_transport(payload_dir, server_instrumented, errlog) if transport == "stdio" else None
        if IS_MCP1:
            async with _v1_session(stdio, memory_server) as caller:
                yield caller
            return
        async with Client(
            stdio if stdio is not None else memory_server, read_timeout_seconds=READ_TIMEOUT_S
        ) as client:

            async def call_tool(name: str, arguments: dict[str, Any]) -> str:
                return _first_text(await client.call_tool(name, arguments))

            yield call_tool


@contextlib.asynccontextmanager
async def variant_session(
    transport: str,
    *,
    instrumented: bool,
    telemetry: BenchTelemetry,
    payload_dir: Path,
    memory_server: Any,
    log_path: Path,
) -> AsyncIterator[Caller]:
    """`connect` for one block of a variant: instrumented, this process is too (with fresh
    metrics, until the block ends), as is the stdio server."""
    if instrumented:
        telemetry.start()
    try:
        async with connect(
            transport,
            payload_dir=payload_dir,
            server_instrumented=instrumented,
            memory_server=memory_server,
            log_path=log_path,
        ) as call:
            yield call
    finally:
        if instrumented:
            telemetry.stop()


@contextlib.asynccontextmanager
async def _v1_session(stdio: Any, memory_server: Any) -> AsyncIterator[Caller]:
    timeout = timedelta(seconds=READ_TIMEOUT_S)
    async with contextlib.AsyncExitStack() as stack:
        if stdio is None:
            session = await stack.enter_async_context(
                create_connected_server_and_client_session(memory_server, read_timeout_seconds=timeout)
            )
        else:
            read_stream, write_stream = await stack.enter_async_context(stdio)
            session = await stack.enter_async_context(
                ClientSession(read_stream, write_stream, read_timeout_seconds=timeout)
            )
            await session.initialize()

        async def call_tool(name: str, arguments: Mapping[str, Any]) -> str:
            return _first_text(await session.call_tool(name, dict(arguments)))

        yield call_tool
