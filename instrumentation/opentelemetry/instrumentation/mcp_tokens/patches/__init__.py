# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""One patch module per MCP SDK line; `select_patcher` picks by the installed `mcp` version."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Tracer

from .versions import MIN_V1, installed_mcp_version

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

__all__ = ["Patcher", "installed_mcp_version", "select_patcher"]


class Patcher(Protocol):
    def __init__(self, pipeline: Pipeline, tracer: Tracer, guard: Guard | None = None) -> None: ...

    def patch(self) -> None:
        """Apply every patch; on failure raise (the instrumentor undoes what was applied)."""

    def unpatch(self) -> None:
        """Restore every patched attribute to the very object it was."""


def select_patcher(version: tuple[int, int] | None) -> type[Patcher] | None:
    """The patcher for an mcp version, or None for a version we cannot handle."""
    if version is None:
        return None
    if version[0] == 1 and version >= MIN_V1:
        from .mcp_v1 import McpV1Patcher  # noqa: PLC0415 -- imports the installed SDK line only

        return McpV1Patcher
    if version[0] == 2:
        from .mcp_v2 import McpV2Patcher  # noqa: PLC0415 -- imports the installed SDK line only

        return McpV2Patcher
    return None
