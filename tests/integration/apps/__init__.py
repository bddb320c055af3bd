# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Test MCP servers and client drivers shared by the integration tests, the demo and the benchmark.

Three server flavours expose one tool set (`payloads`) over every transport, on whichever mcp line
the interpreter has: `lowlevel_server` (the SDK's low-level `Server`), `sdk_fastmcp_server` (1.x
`FastMCP` / 2.x `MCPServer`) and `fastmcp_server` (standalone fastmcp 3.x / 4.x). `client` drives
them end to end; `harness` starts them as subprocesses with bounded waits.
"""
