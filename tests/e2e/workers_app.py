# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The demo server as a module-level ASGI app for multi-worker servers, plus `worker_pid`:

    uvicorn tests.e2e.workers_app:app --workers 2
    gunicorn -k uvicorn_worker.UvicornWorker -w 2 tests.e2e.workers_app:app

Stateless streamable HTTP, so any worker can answer any request. `worker_pid` returns a str,
which MCPServer/FastMCP also send wrapped as `structuredContent: {"result": ...}`."""

from __future__ import annotations

import os

from examples import demo_server

PID_TOOL = "worker_pid"


def worker_pid() -> str:
    return str(os.getpid())


server = demo_server.build_server()
server.tool(name=PID_TOOL, description="The process id of the worker that answers this call.")(worker_pid)
app = demo_server.http_app(server, stateless=True)
