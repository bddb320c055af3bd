# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The demo agent: connects to the demo server over streamable HTTP and uses every feature.

    python -m examples.demo_client --url http://127.0.0.1:8765/mcp

Scenario `demo` (default): list the tools, call every tool several times, read the handbook
resource, get the prompt, then run one conversation in `budget_scope("demo-conversation",
context_window=32000)` that fills the window past its warning and critical levels.
Scenario `calls`: exactly the calls of `--calls-file` (a JSON list of `[tool, arguments]`).

When it is done it waits for the analysis worker (if mcp-tokens instrumented this process),
prints one line `DEMO-CLIENT {json}` and then, with `--linger S`, stays alive (so its
`/metrics` can be scraped) until its standard input closes or S seconds pass. With
`--sustain-tools a,b` it keeps calling those tools every `--interval` seconds meanwhile.
Every wait is bounded; the exit status is 1 if any call failed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import os
import select
import sys
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from mcp import ClientSession
from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, budget_scope
from pydantic import AnyUrl

from . import demo_content as content

MCP_MAJOR = int(importlib.metadata.version("mcp").split(".")[0])
if MCP_MAJOR >= 2:
    from mcp import Client
else:
    try:  # renamed in 1.2x; older 1.x only has the old name
        from mcp.client.streamable_http import streamable_http_client as http_client
    except ImportError:  # pragma: no cover - depends on the installed 1.x
        from mcp.client.streamable_http import (  # type: ignore[attr-defined,no-redef,unused-ignore]
            streamablehttp_client as http_client,
        )

MARKER = "DEMO-CLIENT "
BUDGET_SCOPE = "demo-conversation"
BUDGET_WINDOW = 32_000
READ_TIMEOUT_S = 30.0
DRAIN_TIMEOUT_S = 10.0


class DemoSession:
    """The few client calls the demo needs, the same on mcp 1.x (ClientSession) and 2.x (Client)."""

    def __init__(self, client: Any, v2: bool) -> None:
        self._client = client
        self._v2 = v2
        self.calls: dict[str, int] = {}
        self.errors: list[str] = []

    async def list_tools(self) -> list[str]:
        return [tool.name for tool in await self.list_tool_definitions()]

    async def list_tool_definitions(self) -> list[Any]:
        """The listed tools, as the SDK's `Tool` models."""
        return list((await self._client.list_tools()).tools)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        self.calls[name] = self.calls.get(name, 0) + 1
        try:
            result = await self._client.call_tool(name, arguments)
        except Exception as exc:
            self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
            return None
        wire: dict[str, Any] = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if wire.get("isError"):
            self.errors.append(f"{name}: error result {wire.get('content')!r:.200}")
        return wire

    async def read_resource(self, uri: str) -> None:
        if self._v2:
            await self._client.read_resource(uri)
        else:
            await self._client.read_resource(AnyUrl(uri))

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> None:
        await self._client.get_prompt(name, arguments)


@contextlib.asynccontextmanager
async def connect(url: str, mode: str = "auto") -> AsyncIterator[DemoSession]:
    """A session to `url`. On mcp 2.x `mode` is the SDK's ("auto": the 2026-07-28 protocol when
    the server offers it; "legacy": the initialize handshake and a stateful HTTP session)."""
    if MCP_MAJOR >= 2:
        async with Client(url, read_timeout_seconds=READ_TIMEOUT_S, mode=mode) as client:
            yield DemoSession(client, v2=True)
        return
    async with http_client(url) as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield DemoSession(session, v2=False)


@contextlib.contextmanager
def conversation(scope_id: str, context_window: int) -> Iterator[None]:
    """One conversation: its calls count against one context budget."""
    with budget_scope(scope_id, context_window=context_window):
        yield


async def run_demo(session: DemoSession, rounds: int) -> None:
    await session.list_tools()
    for index in range(rounds):
        for tool in content.TOOLS:
            await session.call_tool(tool.name, tool.arguments[index % len(tool.arguments)])
    await session.read_resource(content.HANDBOOK_URI)
    await session.get_prompt(content.PROMPT_NAME, {"region": "north"})
    with conversation(BUDGET_SCOPE, BUDGET_WINDOW):
        await session.list_tools()
        await session.call_tool("quarterly_report", {"quarter": "2026-Q3"})
        await session.call_tool("export_audit_log", {"days": 10})
        await session.call_tool("search_orders", {"query": "escalated", "limit": 50})
        await session.call_tool("search_orders", {"query": "overdue", "limit": 50})


async def run_calls(session: DemoSession, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
    for name, arguments in calls:
        await session.call_tool(name, arguments)


def drain_instrumentation(timeout_s: float = DRAIN_TIMEOUT_S) -> bool | None:
    """Wait until mcp-tokens has analysed every exchange of this process (None: not instrumented)."""
    pipeline = McpTokensInstrumentor().pipeline  # the instrumentor is a singleton
    if pipeline is None:
        return None
    return bool(pipeline.force_flush(timeout_s))


def stdin_closed_within(timeout_s: float) -> bool:
    """True once standard input has a line or reached EOF; False after `timeout_s`."""
    if timeout_s <= 0:
        return False
    try:
        ready, _, _ = select.select([sys.stdin], [], [], timeout_s)
    except (OSError, ValueError):  # no usable stdin: just wait
        time.sleep(timeout_s)
        return False
    if ready:
        sys.stdin.readline()
        return True
    return False


async def sustain(session: DemoSession, tools: Sequence[str], interval_s: float, deadline: float) -> None:
    """Call `tools` every `interval_s` until stdin closes or `deadline` (monotonic) passes."""
    while time.monotonic() < deadline:
        for name in tools:
            tool = content.TOOLS_BY_NAME[name]
            await session.call_tool(name, tool.arguments[0])
        drain_instrumentation(interval_s)
        remaining = min(interval_s, deadline - time.monotonic())
        if await asyncio.to_thread(stdin_closed_within, remaining):
            return


def report(session: DemoSession, drained: bool | None) -> None:
    line = {"calls": session.calls, "errors": session.errors, "drained": drained, "pid": os.getpid()}
    print(MARKER + json.dumps(line, sort_keys=True), flush=True)


async def main_async(args: argparse.Namespace) -> int:
    async with connect(args.url, args.mode) as session:
        if args.scenario == "calls":
            await run_calls(session, load_calls(args.calls_file))
        else:
            await run_demo(session, args.rounds)
        report(session, drain_instrumentation())
        deadline = time.monotonic() + args.linger
        if args.sustain_tools:
            await sustain(session, args.sustain_tools, args.interval, deadline)
            drain_instrumentation()
        else:
            await asyncio.to_thread(stdin_closed_within, args.linger)
    return 1 if session.errors else 0


def load_calls(path: Path | None) -> list[tuple[str, dict[str, Any]]]:
    if path is None:
        raise SystemExit("--scenario calls needs --calls-file")
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list) or not all(isinstance(item, list) and len(item) == 2 for item in data):
        raise SystemExit(f"{path}: expected a JSON list of [tool, arguments] pairs")
    return [(str(name), dict(arguments)) for name, arguments in data]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Drive the mcp-tokens demo server.")
    parser.add_argument(
        "--url", required=True, help="streamable HTTP endpoint, e.g. http://127.0.0.1:8765/mcp"
    )
    parser.add_argument("--scenario", choices=("demo", "calls"), default="demo")
    parser.add_argument(
        "--mode", choices=("auto", "legacy"), default="auto", help="mcp 2.x protocol era (ignored on 1.x)"
    )
    parser.add_argument("--calls-file", type=Path, help="JSON list of [tool, arguments] (scenario calls)")
    parser.add_argument("--rounds", type=int, default=3, help="times every tool is called (scenario demo)")
    parser.add_argument("--linger", type=float, default=0.0, help="seconds to stay alive afterwards, at most")
    parser.add_argument("--sustain-tools", type=lambda s: [t for t in s.split(",") if t], default=[])
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between sustained calls")
    args = parser.parse_args(argv)
    unknown = [name for name in args.sustain_tools if name not in content.TOOLS_BY_NAME]
    if unknown:
        parser.error(f"--sustain-tools: unknown tools {unknown}; known: {sorted(content.TOOLS_BY_NAME)}")
    if not 0 <= args.linger <= 3600 or not 0.05 <= args.interval <= 60 or not 1 <= args.rounds <= 100:
        parser.error("--linger must be in [0, 3600], --interval in [0.05, 60], --rounds in [1, 100]")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    sys.exit(asyncio.run(main_async(parse_args(argv))))


if __name__ == "__main__":
    main()
