# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The pipeline's calls the benchmarks make, on this mcp-tokens and on the one before it.

A before/after comparison runs these benchmarks against an older checkout (PYTHONPATH):
there the analysis started in `instrument()` (`Pipeline.start`), and flushing was
`worker.drain`.
"""

from __future__ import annotations

from typing import Any


def start_analysis(pipeline: Any, timeout_s: float) -> bool:
    """Start the analysis and wait for its tokenizer; whether it loaded."""
    start = getattr(pipeline, "start", None)
    if start is not None:
        start()
    return bool(pipeline.wait_ready(timeout_s))


def flush(pipeline: Any, timeout_s: float) -> bool:
    """Wait for the analysis of everything submitted so far; whether it finished."""
    force_flush = getattr(pipeline, "force_flush", None)
    return bool(force_flush(timeout_s) if force_flush is not None else pipeline.worker.drain(timeout_s))
