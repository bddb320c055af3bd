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
    ``o200k_base`` or ``cl100k_base`` (bundled, offline); with ``TOKENIZER_FILE``, the name reported
    as ``mcp_tokens.encoding``
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
    exchanges queued or in analysis; beyond it they are skipped (``overload``)
``OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_LABEL_VALUES`` (default ``200``)
    distinct tool and prompt names per server before ``_OTHER``
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (default ``false``)
    record tool arguments and results on spans
``OTEL_INSTRUMENTATION_MCP_TOKENS_CONTENT_MAX_CHARS`` (default ``4096``)
    truncation of captured content, in characters
``OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS`` (default ``process``)
    where the analysis runs: ``process`` (a helper process at the lowest priority) or ``thread`` (a
    thread of the application, sharing its GIL)
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

.. /settings:table

Counting happens off the response path, in a helper process that the first MCP exchange
starts (the same interpreter, at the lowest CPU priority; it exits with the application),
so the application's interpreter only hands payloads over and records the findings; a
process that never sees an MCP message starts none. ``ANALYSIS=thread`` runs the analysis
on a thread of the application instead. A guard (``GUARD``, ``GUARD_BUDGET``; off by
default) is the exception: it counts on the response path, in the application's process,
as much of a result as it needs to decide (docs/guardrails.md).

The entry point is named ``mcp_tokens`` (not ``mcp``), so
``OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=mcp`` disables other MCP instrumentations only.
"""

from __future__ import annotations

import atexit
import functools
import logging
import sys
from collections.abc import Callable, Collection
from types import ModuleType
from typing import Any

import wrapt
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.metrics import Meter, get_meter
from opentelemetry.trace import Tracer, get_tracer

from .config import Settings
from .package import _instruments
from .scope import budget_scope, current_budget_scope
from .version import __version__

__all__ = ["McpTokensInstrumentor", "__version__", "budget_scope", "current_budget_scope"]

_logger = logging.getLogger(__name__)
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"


class McpTokensInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Patches the MCP SDK's client and server sessions to emit token telemetry."""

    _patcher: Any = None
    _pipeline: Any = None
    _guard: Any = None
    # Installs the patches and the guard: at once, or when the MCP SDK is imported.
    _install: Callable[[], None] | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        # Nothing may escape: an exception here would abort opentelemetry-instrument's
        # start-up for every instrumentor loaded after this one.
        try:
            self._start(**kwargs)
        except Exception:
            _logger.warning("mcp-tokens could not instrument MCP; continuing without it", exc_info=True)
            self._stop()

    def _start(self, **kwargs: Any) -> None:
        # Imported when instrument() runs, not when the entry point is loaded (every
        # instrumentor's module is imported by opentelemetry-instrument). The pipeline
        # starts nothing: its thread and helper wait for the first exchange.
        from .pipeline import Pipeline  # noqa: PLC0415

        tracer = get_tracer(
            __name__, __version__, kwargs.pop("tracer_provider", None), schema_url=_SCHEMA_URL
        )
        meter = get_meter(__name__, __version__, kwargs.pop("meter_provider", None), schema_url=_SCHEMA_URL)
        self._pipeline = pipeline = Pipeline(Settings.load(kwargs), meter)
        self._install = install = functools.partial(self._patch, pipeline, tracer, meter)
        if "mcp" in sys.modules:
            install()
        else:
            # A process that never imports the MCP SDK (a server's supervisor, the gunicorn
            # master, multiprocessing's resource tracker) loads neither it nor our patches
            # and guard: they are installed when the application imports the SDK.
            wrapt.register_post_import_hook(functools.partial(self._patch_on_import, install), "mcp")
        atexit.register(self._flush_at_exit)

    def _patch(self, pipeline: Any, tracer: Tracer, meter: Meter) -> None:
        from .patches import installed_mcp_version, select_patcher  # noqa: PLC0415 -- the SDK's line

        version = installed_mcp_version()
        patcher_class = select_patcher(version)
        if patcher_class is None:
            _logger.warning("mcp-tokens does not support mcp %s; MCP will not be instrumented", version)
            self._stop()
            return
        if pipeline.settings.guard_enabled:
            from .guard.build import build_guard  # noqa: PLC0415 -- only when a guard is on

            self._guard = build_guard(pipeline.settings, meter, pipeline.labels)
        self._patcher = patcher_class(pipeline, tracer, self._guard)
        self._patcher.patch()

    def _patch_on_import(self, install: Callable[[], None], module: ModuleType) -> None:
        if install is not self._install:  # uninstrumented (or instrumented anew) since
            return
        try:
            install()
        except Exception:
            _logger.warning("mcp-tokens could not instrument MCP; continuing without it", exc_info=True)
            self._stop()

    def _uninstrument(self, **kwargs: Any) -> None:
        self._stop()

    def _stop(self) -> None:
        patcher, pipeline, guard = self._patcher, self._pipeline, self._guard
        self._patcher = self._pipeline = self._guard = self._install = None
        if patcher is not None:
            try:
                patcher.unpatch()
            except Exception:
                _logger.warning("mcp-tokens could not undo every patch", exc_info=True)
        if guard is not None:
            guard.shutdown()
        if pipeline is not None:
            pipeline.shutdown()
        atexit.unregister(self._flush_at_exit)

    def _flush_at_exit(self) -> None:
        # Registered after the SDK providers, so it runs before their shutdown exports.
        if self._guard is not None:
            self._guard.shutdown(timeout=2.0)
        if self._pipeline is not None:
            self._pipeline.shutdown(timeout=5.0)

    @property
    def guard(self) -> Any:
        """The guard (tests); None unless a guard setting is on, and until the patches are
        installed (the MCP SDK is imported)."""
        return self._guard

    @property
    def pipeline(self) -> Any:
        """The running pipeline (tests and benchmarks flush it); None when not instrumented."""
        return self._pipeline
