# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Which MCP SDK is installed: read by the instrumentor to pick a patcher, and by each patcher
to refuse a line it cannot handle."""

from __future__ import annotations

import importlib.metadata

# The oldest 1.x whose patch points we test (see docs/telemetry.md, "Coverage").
MIN_V1 = (1, 23)


def installed_mcp_version() -> tuple[int, int] | None:
    try:
        version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        return None
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None
