# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Instruments a test server process for `test_v1_*.py` and writes what it recorded as JSON.

Loaded from a generated `sitecustomize.py` (see `_v1_support.probed_stdio_target`) when
`MCP_TOKENS_V1_PROBE_OUT` names the output file. The snapshot is rewritten each time a span
ends and once more at exit: a stdio client may kill its server without letting it exit
(fastmcp's client does when its event loop closes), and the spans must still be there.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
import threading
from dataclasses import asdict
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor


class _SnapshotOnEnd(SpanProcessor):
    def __init__(self, write: Any) -> None:
        self._write = write

    def on_end(self, span: ReadableSpan) -> None:
        self._write()


def install() -> None:
    out = os.environ.get("MCP_TOKENS_V1_PROBE_OUT")
    if not out:
        return
    # sitecustomize loads this module in every process it starts: the test harness (the MCP SDK,
    # the instrumentation) loads only in a process that is probed.
    from tests.integration._v1_support import Telemetry, metric_points, span_record  # noqa: PLC0415

    telemetry = Telemetry(cumulative=True)
    lock = threading.Lock()

    def write() -> None:
        with lock:
            spans = [asdict(span_record(span)) for span in telemetry.exporter.get_finished_spans()]
            points = [asdict(point) for point in metric_points(telemetry.reader)]
            partial = out + ".partial"
            with open(partial, "w", encoding="utf-8") as handle:
                json.dump({"spans": spans, "points": points}, handle, default=_jsonable)
            os.replace(partial, out)  # the test polls for `out`: never let it read half a file

    def write_at_exit() -> None:
        telemetry.settle()
        write()

    telemetry.tracer_provider.add_span_processor(_SnapshotOnEnd(write))
    atexit.register(write_at_exit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    return str(value)
