# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The mcp-tokens demo: an MCP server whose tools span every risk tier, a client that drives it,
and an orchestrator (`python -m examples.demo`, `make demo`) that runs both under
`opentelemetry-instrument` with the Prometheus exporter and prints what the metrics say."""
