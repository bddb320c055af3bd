# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The saturation benchmark's server: one tool whose result is a page of JSON records.

    gunicorn -k uvicorn_worker.UvicornWorker -w 2 tests.bench.saturation_app:app

Stateless streamable HTTP. `records(seed)` returns 20 to 119 records (2-12 KB of JSON text)
and the same records as structuredContent, always the same for the same seed, so the
benchmark knows what every call returned without keeping the results. Every HTTP response
names the worker that served it (`x-worker-pid`): a client's keep-alive connection stays on
the worker that accepted it, and the benchmark spreads its clients evenly over the workers.

With `MCP_TOKENS_BENCH_PATCHES_ONLY=1` (the benchmark's `patches` variant) every exchange's
span is ended where the patch hands the exchange over, and nothing is analysed or recorded:
the patches and spans of mcp-tokens without its analysis thread.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from mcp import types

from examples import demo_server

NAMES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
STATUSES = ("open", "shipped", "delayed", "returned", "closed")


def rows_of(seed: int) -> list[dict[str, Any]]:
    rnd = random.Random(seed)
    return [
        {
            "id": seed * 1000 + index,
            "customer": f"{rnd.choice(NAMES)} {rnd.choice(NAMES)}",
            "status": rnd.choice(STATUSES),
            "amount": round(rnd.uniform(1, 5000), 2),
            "note": " ".join(rnd.choice(NAMES) for _ in range(rnd.randint(2, 8))),
        }
        for index in range(20 + seed % 100)
    ]


def result_of(seed: int) -> dict[str, Any]:
    """The wire result of `records(seed)`."""
    rows = rows_of(seed)
    return {"content": [{"type": "text", "text": json.dumps(rows)}], "structuredContent": {"rows": rows}}


def records(seed: int) -> types.CallToolResult:
    return types.CallToolResult.model_validate(result_of(seed))


def build_server() -> Any:
    if demo_server.MCP_MAJOR >= 2:
        server: Any = demo_server.MCPServer("saturation", log_level="WARNING")
    else:
        server = demo_server.FastMCP("saturation", log_level="WARNING")
    server.tool(name="records", description="A page of order records.")(records)
    return server


Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Message, Receive, Send], Awaitable[None]]
WORKER_HEADER = "x-worker-pid"
PATCHES_ONLY_ENV = "MCP_TOKENS_BENCH_PATCHES_ONLY"


def naming_the_worker(inner: ASGIApp) -> ASGIApp:
    """`inner`, with every HTTP response's headers naming the process that served it."""

    async def app(scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                pid = (WORKER_HEADER.encode(), str(os.getpid()).encode())
                message = {**message, "headers": [*message.get("headers", ()), pid]}
            await send(message)

        await inner(scope, receive, named)

    return app


def ending_spans_at_the_hand_off() -> None:
    """Replace the hand-off to the analysis thread by the span's end (`patches` variant)."""
    from opentelemetry.instrumentation.mcp_tokens import pipeline, worker  # noqa: PLC0415

    def submit(self: worker.AnalysisWorker, exchange: Any) -> None:
        pipeline._end_span(exchange)  # what the worker does once an exchange is recorded

    worker.AnalysisWorker.submit = submit  # type: ignore[method-assign]


if os.environ.get(PATCHES_ONLY_ENV) == "1":
    ending_spans_at_the_hand_off()
app = naming_the_worker(demo_server.http_app(build_server(), stateless=True))
