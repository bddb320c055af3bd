# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

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
``context_window=``; keywords win). A value that does not parse is logged once and the
default is used. docs/telemetry.md says what each one changes in detail.

.. settings:table

``OTEL_INSTRUMENTATION_MCP_TOKENS_ENCODING`` (default ``o200k_base``)
    ``o200k_base`` or ``cl100k_base`` (bundled, offline); ``claude-<version>`` (``claude-3``,
    ``claude-4.7``; ``claude``: the latest) counts Claude's tokens, exact with the ``claude`` extra,
    else estimated; with ``TOKENIZER_FILE``, the name reported as ``mcp_tokens.encoding``
``OTEL_INSTRUMENTATION_MCP_TOKENS_TOKENIZER_FILE`` (unset by default)
    a tiktoken BPE file (``base64 rank`` lines) or a HuggingFace ``tokenizer.json`` (needs the
    ``tokenizers`` package, extra ``huggingface``)
``OTEL_INSTRUMENTATION_MCP_TOKENS_TOKENIZER_PATTERN`` (unset by default)
    for a tiktoken BPE file: the family whose split pattern and special tokens to use (``o200k``,
    ``cl100k``, ``llama3``)
``OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_BYTES`` (default ``33554432``)
    payloads above this many UTF-8 bytes are estimated (flagged ``exact=false``)
``OTEL_INSTRUMENTATION_MCP_TOKENS_IMAGE_MODEL`` (default ``anthropic``)
    image token formula: ``anthropic``, ``openai``, ``gemini``
``OTEL_INSTRUMENTATION_MCP_TOKENS_RISK_THRESHOLDS`` (default ``1000,4000,8000``)
    upper bounds of the low, medium and high tiers
``OTEL_INSTRUMENTATION_MCP_TOKENS_OVERHEAD_PATTERN`` (unset by default)
    a Python regex marking overhead blocks (searched in each block's first 64 KiB)
``OTEL_INSTRUMENTATION_MCP_TOKENS_PADDING`` (default ``true``)
    run the padding detectors
``OTEL_INSTRUMENTATION_MCP_TOKENS_CONTEXT_WINDOW`` (default ``200000``)
    the context window of a budget scope, in tokens
``OTEL_INSTRUMENTATION_MCP_TOKENS_BUDGET_THRESHOLDS`` (default ``0.75,0.90``)
    utilisation at which a scope reaches ``warning`` and ``critical``
``OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_SCOPES`` (default ``10000``)
    budget scopes kept (least recently used are dropped)
``OTEL_INSTRUMENTATION_MCP_TOKENS_SCOPE_IDLE_TTL`` (default ``3600``)
    seconds after which an idle scope is dropped
``OTEL_INSTRUMENTATION_MCP_TOKENS_QUEUE_SIZE`` (default ``1024``)
    exchanges held for counting (queued, or at the counter); beyond it they are estimated from their
    length (``overload``)
``OTEL_INSTRUMENTATION_MCP_TOKENS_SPAN_WAIT`` (default ``1``)
    seconds after its call a span may wait for its exact count before it ends with an estimate
    (``mcp_tokens.skipped=late``; the exact count still reaches the metrics)
``OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_LABEL_VALUES`` (default ``200``)
    distinct tool and prompt names per server before ``_OTHER``
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (default ``false``)
    record tool arguments and results on spans
``OTEL_INSTRUMENTATION_MCP_TOKENS_CONTENT_MAX_CHARS`` (default ``4096``)
    truncation of captured content, in characters
``OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS`` (default ``process``)
    where the analysis runs: ``process`` (the user's counting service, shared by every instrumented
    process of the user) or ``thread`` (a thread of the application, sharing its GIL)
``OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR`` (unset by default)
    the directory of the counting service's sockets (unset: ``$XDG_RUNTIME_DIR/mcp-tokens``, else
    ``mcp-tokens-<uid>`` in the temporary directory), created if missing and used only if it is the
    user's and no one else can open it
``OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_PROCESSES`` (default ``0``)
    the counting service's counting processes (0: one per two cores, at most four)
``OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_IDLE_TIMEOUT`` (default ``300``)
    seconds a counting process, and then the counting service, stays once its last client has gone
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD`` (default ``off``)
    ``off``, ``warn``, ``truncate`` or ``reject``: what happens to a tool result or resource read
    over its limit (docs/guardrails.md)
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_MAX_RESULT_TOKENS`` (default ``25000``)
    the guard's limit of every tool result and resource read, in tokens (Claude Code's default cap)
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_TOOL_LIMITS`` (unset by default)
    ``name=tokens,...``: per-tool limits replacing ``GUARD_MAX_RESULT_TOKENS`` for those tools (0:
    no limit); as a keyword, also a dict
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_BUDGET`` (default ``off``)
    ``off``, ``truncate`` or ``reject``: a result that would take its budget scope past the context
    window gets what is left, or is refused
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_REPEAT_LIMIT`` (default ``0``)
    more calls than this of the same tool with the same arguments within the window, in one scope:
    the ``GUARD`` mode applies to the rest (0: off)
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_REPEAT_WINDOW`` (default ``60``)
    the repeat limit's window, in seconds
``OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_NOTICE`` (unset by default)
    the guard's notice text (unset: the built-in one), with ``{tool}`` (or the resource URI),
    ``{original_tokens}``, ``{delivered_tokens}``, ``{limit}``; other braces stay as written
``OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS`` (unset by default)
    ``claude-code,codex,...``: hosts whose limits each response and listing is checked against
    (``claude-code``, ``codex``, ``copilot-cli``, ``vscode``, ``cursor``, ``windsurf``, ``gemini``);
    as a keyword, also a list

.. /settings:table

Counting happens off the response path, in the user's counting service: one process per
machine, user and tokenizer, shared by every instrumented process of the user, which the
first MCP exchange starts if none runs; it counts at idle priority and exits
``COUNTER_IDLE_TIMEOUT`` after its last client has gone. The application's interpreter only
hands payloads over and records the findings; a process that never sees an MCP message
starts nothing. A span waits at most ``SPAN_WAIT`` for its exact count. ``ANALYSIS=thread``
runs the analysis on a thread of the application instead, as where no service can run. A
guard (``GUARD``, ``GUARD_BUDGET``; off by default) counts on the response path as much of a
result as it needs to decide, asking the counting service (which answers it at normal
priority) or, where none can run, a tokenizer in the application's process
(docs/guardrails.md).

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
