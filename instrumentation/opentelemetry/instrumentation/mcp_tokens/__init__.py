"""Token economics for the Model Context Protocol, as OpenTelemetry.

Exact token counts for every MCP tool result, tool argument, tool listing, resource and
prompt, with overhead, risk tier, context-budget utilisation and adversarial-padding
findings, on the MCP semantic-convention spans and as metrics. Works with the MCP Python
SDK 1.x (>= 1.23) and 2.x, and FastMCP on top of them, on the client and the server side.

Usage
-----
Zero-code, with the ``opentelemetry-instrument`` launcher::

    pip install opentelemetry-instrumentation-mcp-tokens
    opentelemetry-instrument --traces_exporter otlp --metrics_exporter prometheus \\
        python my_mcp_server.py

From code::

    from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor, budget_scope

    McpTokensInstrumentor().instrument(context_window=128_000)

    # One conversation across several servers is one budget scope:
    with budget_scope("conversation-42", context_window=128_000):
        await session.call_tool("search", {"q": "tokens"})

Configuration
-------------
Every setting is an environment variable, and a keyword of ``instrument()`` with the
lowercase name after the prefix (``OTEL_INSTRUMENTATION_MCP_TOKENS_CONTEXT_WINDOW`` is
``context_window=``). docs/telemetry.md lists them all with their defaults:
``ENCODING`` (o200k_base), ``TOKENIZER_FILE``, ``TOKENIZER_PATTERN``, ``MAX_BYTES``,
``IMAGE_MODEL``, ``RISK_THRESHOLDS``, ``OVERHEAD_PATTERN``, ``PADDING``,
``CONTEXT_WINDOW``, ``BUDGET_THRESHOLDS``, ``MAX_SCOPES``, ``SCOPE_IDLE_TTL``,
``QUEUE_SIZE``, ``MAX_LABEL_VALUES``, ``CONTENT_MAX_CHARS``, ``ANALYSIS``; content capture
follows ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (off by default).

Counting happens off the response path, in a helper process that the first MCP exchange
starts (the same interpreter, at the lowest CPU priority; it exits with the application),
so the application's interpreter only hands payloads over and records the findings; a
process that never sees an MCP message starts none. ``ANALYSIS=thread`` runs the analysis
on a thread of the application instead.

The entry point is named ``mcp_tokens`` (not ``mcp``), so
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=mcp`` disables other MCP instrumentations only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

if TYPE_CHECKING:
    from .instrumentor import McpTokensInstrumentor
    from .scope import budget_scope, current_budget_scope

__all__ = ["McpTokensInstrumentor", "__version__", "budget_scope", "current_budget_scope"]

# Imported on first use: the counting service imports modules of this package and must not
# load the OpenTelemetry API and the instrumentor's dependencies (about 14 MB) for nothing.
_LAZY = {
    "McpTokensInstrumentor": ".instrumentor",
    "budget_scope": ".scope",
    "current_budget_scope": ".scope",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib  # noqa: PLC0415 -- on first use of a lazy name only

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
