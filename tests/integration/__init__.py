# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Integration tests: real MCP servers and clients on both SDK lines."""
