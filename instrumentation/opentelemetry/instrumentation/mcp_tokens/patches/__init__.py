"""One patch module per MCP SDK line; `select_patcher` picks by the installed `mcp` version."""

from __future__ import annotations

import importlib.metadata
import logging
from typing import TYPE_CHECKING, Protocol

from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.trace import Tracer

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard

_logger = logging.getLogger(__name__)


class Patcher(Protocol):
    def __init__(self, pipeline: Pipeline, tracer: Tracer, guard: Guard | None = None) -> None: ...

    def patch(self) -> None:
        """Apply every patch; on failure raise (the instrumentor undoes what was applied)."""

    def unpatch(self) -> None:
        """Restore every patched attribute to the very object it was."""


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


# The oldest 1.x whose patch points we test (see docs/telemetry.md, "Coverage").
MIN_V1 = (1, 23)
