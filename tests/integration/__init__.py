"""Integration tests: real MCP servers and clients on both SDK lines."""
