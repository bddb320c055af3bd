# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Client drivers for the test servers: one API for both mcp lines, both client kinds (the SDK's
session/`Client`, standalone fastmcp's `Client`) and every transport.

    async with connect(Target("lowlevel", "stdio"), client="sdk", era="legacy") as driver:
        outcome = await driver.call_tool("echo", {"text": "hi"})

    report = await run_standard_session(Target("fastmcp", "streamable-http", base_url=url))

Every driver answers sampling/createMessage with `payloads.sampling_answer` of the first message.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anyio

from . import harness, payloads
from ._client_common import (
    CLIENT_KINDS,
    CLIENT_TRANSPORTS,
    ERAS,
    CallOutcome,
    Driver,
    SessionReport,
    Target,
)
from ._line import IS_MCP1

if IS_MCP1:
    from ._client_sdk_v1 import connect as connect_sdk_v1
else:
    from ._client_sdk_v2 import connect as connect_sdk_v2

__all__ = [
    "CLIENT_KINDS",
    "CLIENT_TRANSPORTS",
    "ERAS",
    "CallOutcome",
    "Driver",
    "SessionReport",
    "Target",
    "connect",
    "default_server",
    "run_standard_session",
    "sampling_unsupported_reason",
]

SESSION_TIMEOUT_S = 60.0


def default_server(flavour: str) -> Any:
    """A fresh in-process server of `flavour`. The server modules load on first use, so
    fastmcp's (fastmcp is optional) only when a test asks for it."""
    return importlib.import_module(harness.server_module(flavour)).build_server()


def sampling_unsupported_reason(transport: str, era: str = "legacy") -> str | None:
    """Why the `sample` tool cannot work over this transport, or None when it can.

    A handshake-era server asks the client over a back-channel. Stateless streamable HTTP has
    none that survives the request: the client's answer arrives in a new POST, which a stateless
    server hands to a fresh transport that never sent the question. On 2026-07-28 (`modern`)
    the question travels inside the tools/call result instead, so every transport can sample.
    """
    if transport == "stateless-http" and era == "legacy":
        return (
            "stateless HTTP has no back-channel for a server-to-client request on handshake-era connections"
        )
    return None


@contextlib.asynccontextmanager
async def connect(target: Target, *, client: str = "sdk", era: str = "legacy") -> AsyncIterator[Driver]:
    """A connected, handshaken driver (initialize, or server/discover for `era="modern"` on mcp 2.x)."""
    if client not in CLIENT_KINDS or era not in ERAS or target.transport not in CLIENT_TRANSPORTS:
        raise ValueError(f"connect: unsupported client={client!r} era={era!r} transport={target.transport!r}")
    if IS_MCP1 and era != "legacy":
        raise ValueError("mcp 1.x speaks handshake-era protocol versions only (era='legacy')")
    if target.transport == "memory" and target.server is None:
        target = Target(target.flavour, "memory", server=default_server(target.flavour))
    if client == "fastmcp":
        from ._client_fastmcp import connect as connect_fastmcp  # noqa: PLC0415 -- fastmcp is optional

        async with connect_fastmcp(target, era) as driver:
            yield driver
    elif IS_MCP1:
        async with connect_sdk_v1(target) as driver:
            yield driver
    else:
        async with connect_sdk_v2(target, era) as driver:
            yield driver


async def run_standard_session(
    target: Target,
    *,
    client: str = "sdk",
    era: str = "legacy",
    calls: Iterable[tuple[str, dict[str, Any]]] = payloads.STANDARD_CALLS,
    skip: Iterable[str] = (),
    timeout_s: float = SESSION_TIMEOUT_S,
) -> SessionReport:
    """Connect, list tools, call each tool in `calls` (minus `skip`), read both resources, get the
    prompt; all within `timeout_s`."""
    skipped = set(skip)
    with anyio.fail_after(timeout_s):
        async with connect(target, client=client, era=era) as driver:
            report = SessionReport(driver.server_name, driver.protocol_version)
            report.tool_names = [tool["name"] for tool in await driver.list_tools()]
            for name, arguments in calls:
                if name not in skipped:
                    report.calls[name] = await driver.call_tool(name, arguments)
            for uri in payloads.RESOURCES:
                report.resources[uri] = await driver.read_resource(uri)
            report.prompt_text = await driver.get_prompt(payloads.PROMPT_NAME, {"code": "x = 1"})
    return report
