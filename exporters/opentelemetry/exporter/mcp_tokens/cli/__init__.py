# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The `mcp-tokens` command: profile, lock and diff an MCP server's token economics.

Run it as `mcp-tokens` (console script) or `python -m opentelemetry.exporter.mcp_tokens.cli`;
`app.main` is the entry point. Modules: `connect`/`sdk` (reach a server with mcp 1.x or 2.x),
`static`/`schema` (worst cases from outputSchema), `profile` (exact definition tokens, the
engine's analysis of a real call), `rules` (the recommendation table), `lockfile`, `diff`,
`render*` (terminal table, Markdown, JSON), `errors` (exit codes).
"""
