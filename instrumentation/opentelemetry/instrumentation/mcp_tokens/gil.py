"""Handing the GIL to a waiting thread while the analysis runs Python in this process.

While a background thread of ours runs Python, an event loop whose socket became readable
waits for the GIL until the interpreter's switch interval (5 ms) forces a switch. So our
threads pause on their own every `Pacing.slice_s`: between steps (`yield_gil`), and, for
payloads heavy enough to take long inside one step, at every function call and return
(`sliced`, a profile hook of this thread only). The worker (worker.py), the recorder's
steps (telemetry.py) and the analysis on a thread (link.py) use them.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator

from .engine.blocks import payload_weight
from .pacing import PACING, Pacing

_since = threading.local()


def yield_gil(pacing: Pacing = PACING) -> None:
    """Pause briefly if this thread ran `slice_s` since its last pause, so that a thread
    waiting for the GIL runs now rather than after the switch interval."""
    if time.perf_counter() - getattr(_since, "at", 0.0) >= pacing.slice_s:
        time.sleep(pacing.yield_s)
        _since.at = time.perf_counter()


@contextlib.contextmanager
def sliced(pacing: Pacing = PACING) -> Iterator[None]:
    """Run the block with `yield_gil` at every function call and return of this thread,
    so that long pure-Python stretches give the GIL away every `slice_s`. A profile hook
    someone else set is kept (and the block then runs without pauses inside steps)."""
    if sys.getprofile() is not None:
        yield
        return

    def pause_hook(frame: object, event: str, arg: object) -> None:
        if event in ("call", "c_return", "return"):
            yield_gil(pacing)

    sys.setprofile(pause_hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def needs_slicing(
    request: object, response: object, pacing: Pacing = PACING, *, by_chars: bool = True
) -> bool:
    """Whether handling these payloads takes long enough in Python to be `sliced`: analysing
    them is heavy by characters or by values (a listing of 20,000 tools holds few
    characters a value); encoding them for the helper (`by_chars=False`) only by values,
    since long strings cross as they are, in bounded steps."""
    first, second = payload_weight(request), payload_weight(response)
    heavy_chars = by_chars and first.chars + second.chars >= pacing.slice_from_chars
    return heavy_chars or first.nodes + second.nodes >= pacing.slice_from_nodes
