# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The token engine: pure analysis of MCP payloads (no `mcp` import).

It turns wire JSON (a CallToolResult, a tools/list result, a ReadResourceResult, a
GetPromptResult, tool arguments, a sampling request) into an immutable `Analysis`:
tokens per content block and in total, overhead by kind, risk tier and padding
findings. `BudgetLedger` accumulates analyses per budget scope.
"""
