# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`McpTokensInstrumentor`: the patches, the pipeline and the guard, on and off (the package's
docstring is the user guide)."""

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

from .package import _instruments
from .version import __version__

_logger = logging.getLogger(__name__)
# The instrumentation scope of every span and metric: the package's name.
_SCOPE = __name__.rpartition(".")[0]
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
        tracer = get_tracer(_SCOPE, __version__, kwargs.pop("tracer_provider", None), schema_url=_SCHEMA_URL)
        meter = get_meter(_SCOPE, __version__, kwargs.pop("meter_provider", None), schema_url=_SCHEMA_URL)
        self._install = install = functools.partial(self._patch, dict(kwargs), tracer, meter)
        if "mcp" in sys.modules:
            install()
        else:
            # A process that never imports the MCP SDK (a server's supervisor, the gunicorn
            # master, multiprocessing's resource tracker) reads no settings and loads neither
            # the SDK nor our pipeline, patches and guard: they come when the application
            # imports the SDK.
            wrapt.register_post_import_hook(functools.partial(self._patch_on_import, install), "mcp")
        atexit.register(self._flush_at_exit)

    def _patch(self, settings: dict[str, Any], tracer: Tracer, meter: Meter) -> None:
        # Imported here, not when the entry point is loaded (opentelemetry-instrument imports
        # every instrumentor's module). The pipeline starts nothing: its thread and the
        # counting service wait for the first exchange.
        from .config import Settings  # noqa: PLC0415
        from .patches import installed_mcp_version, select_patcher  # noqa: PLC0415 -- the SDK's line
        from .pipeline import Pipeline  # noqa: PLC0415

        self._pipeline = pipeline = Pipeline(Settings.load(settings), meter)
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
        """The running pipeline (tests and benchmarks flush it); None when not instrumented,
        and until the patches are installed (the MCP SDK is imported)."""
        return self._pipeline
