# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Which mcp line (1.x or 2.x) and which standalone fastmcp the interpreter has."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def _major(distribution: str) -> int | None:
    try:
        return int(version(distribution).split(".")[0])
    except PackageNotFoundError:
        return None


MCP_MAJOR = _major("mcp")
FASTMCP_MAJOR = _major("fastmcp")
IS_MCP1 = MCP_MAJOR == 1
IS_MCP2 = MCP_MAJOR == 2
HAS_FASTMCP = FASTMCP_MAJOR in (3, 4)


def describe() -> str:
    return f"mcp {version('mcp')}" + (f", fastmcp {version('fastmcp')}" if HAS_FASTMCP else "")
