# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How a failed report gate becomes the process's exit status.

Python offers no way to change the exit status once the program is ending, except ending
it: `os._exit(code)`. Doing that in an exit hook skips every hook that has not run yet, so
the hook must run last, after the OpenTelemetry providers have flushed:

- `atexit` runs hooks in the reverse order of registration. `opentelemetry-instrument`
  imports the exporters it was asked for *before* it creates the tracer, meter and logger
  providers (whose shutdowns are exit hooks), so the hook this module registers when it is
  first imported runs after all of them: after the meter provider's shutdown has exported
  one last time and written the report, and after spans and logs were flushed.
- Hooks registered even earlier (Python's `logging` shutdown) are run by the hook itself
  before it exits: `logging.shutdown()`, then stdout and stderr are flushed.
- It acts only when a gate failed, and only in the process that set it (a forked child
  inherits the hook, not the verdict). A run whose gates passed exits exactly as it would
  have without the exporter.

The process then exits with the gate's code even if it was about to exit with another
(non-zero) status: a failed test run under a failed gate still fails.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable

_logger = logging.getLogger(__name__)


class ExitGate:
    def __init__(self, exit_function: Callable[[int], object] = os._exit) -> None:
        self._lock = threading.Lock()
        self._code: int | None = None
        self._pid: int | None = None
        self._before_exit: list[Callable[[], None]] = []
        self._exit = exit_function

    def fail(self, code: int) -> None:
        """Make this process exit with `code` when it ends."""
        with self._lock:
            self._code, self._pid = code, os.getpid()

    def clear(self) -> None:
        with self._lock:
            self._code = self._pid = None

    @property
    def code(self) -> int | None:
        return self._code if self._pid == os.getpid() else None

    def before_exit(self, callback: Callable[[], None]) -> None:
        """Run `callback` at exit before the verdict applies (e.g. write a report whose meter
        provider was never shut down)."""
        with self._lock:
            self._before_exit.append(callback)

    def run(self) -> None:
        """The exit hook."""
        for callback in list(self._before_exit):
            try:
                callback()
            except Exception:
                _logger.warning("mcp-tokens report: an exit callback failed", exc_info=True)
        code = self.code
        if code is None:
            return
        _flush_everything()
        self._exit(code)


def _flush_everything() -> None:
    # A broken handler or a closed stream must not keep the verdict from applying.
    with contextlib.suppress(Exception):
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


GATE = ExitGate()
atexit.register(GATE.run)
