# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""CPU timing shared by the benchmarks and the few unit tests that guard against slowdowns."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def best_cpu_seconds_each(runs: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best process CPU time of each run, the runs taking turns so that a slow spell of the
    machine hits them all.

    CPU time, not wall time: on a shared 2-core machine another process's burst would
    otherwise count against the code under test. The collector is paused so that a full
    collection of the caller's own heap (corpora, hypothesis) is not billed to whichever
    run triggers it. Never below a microsecond, so that rates stay finite.
    """
    best = [float("inf")] * len(runs)
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeat):
            for index, run in enumerate(runs):
                start = time.process_time()
                run()
                best[index] = min(best[index], time.process_time() - start)
    finally:
        gc.enable()
    return [max(seconds, 1e-6) for seconds in best]
