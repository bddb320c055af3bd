# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The whole suite's counting service lives in a directory of its own, and goes with it."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

_VARIABLE = "OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR"
_SPAN_WAIT = "OTEL_INSTRUMENTATION_MCP_TOKENS_SPAN_WAIT"
# Tests assert exact counts on spans: on a busy test machine the counter, at idle priority,
# can take longer than a span's default second, so spans of the tests wait longer.
SPAN_WAIT_S = "120"


@pytest.fixture(scope="session", autouse=True)
def counting_service_directory() -> Iterator[Path]:
    """Every instrumented process the tests start (they inherit the environment) shares one
    service in a fresh directory, not the user's; it is stopped when the session ends."""
    base = Path(tempfile.mkdtemp(prefix="mct-suite-"))
    directory = base / "counter"
    previous = {name: os.environ.get(name) for name in (_VARIABLE, _SPAN_WAIT)}
    os.environ[_VARIABLE] = str(directory)
    os.environ[_SPAN_WAIT] = SPAN_WAIT_S
    try:
        yield directory
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _stop_services(directory)
        shutil.rmtree(base, ignore_errors=True)


def _stop_services(directory: Path) -> None:
    needle = os.fsencode(directory)
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                command = (entry / "cmdline").read_bytes()
                if needle in command and b"counting.service import main" in command:
                    os.kill(int(entry.name), signal.SIGTERM)
