"""Whether the machine has idle CPU for the analysis helper beside the application's calls.

Even at nice 19 a helper counting on the cores the application's calls need costs them
its scheduler slices. So once the helper has waited for calls in flight as long as it may
(activity.py), it works beside them only if the machine has idle cores beyond those kept
free for the application's wake-ups (`Pacing.keep_free_cores`, or half the machine's cores
if that is fewer): Linux /proc/stat over the last `spare_every_s`, nice time counted as
idle (it is the helpers'). Where /proc/stat cannot be read it does.
"""

from __future__ import annotations

import os
import time

from .pacing import PACING, Pacing


class SpareCpu:
    """The machine's idle cores, read at most every `spare_every_s` (since boot at the
    first reading)."""

    def __init__(self, pacing: Pacing = PACING, path: str = "/proc/stat") -> None:
        self._pacing = pacing
        self._path = path
        self.cpus = os.cpu_count() or 1
        self._at = 0.0
        self._last: tuple[int, int] | None = None
        self._cores: float | None = None

    def for_helper(self) -> bool:
        """Whether the helper may work beside calls in flight."""
        cores = self.cores()
        if cores is None:
            return True
        return cores > min(self._pacing.keep_free_cores, self.cpus / 2)

    def cores(self) -> float | None:
        """Idle cores over the last reading's interval; None where they cannot be read."""
        now = time.monotonic()
        if self._last is not None and now - self._at < self._pacing.spare_every_s:
            return self._cores
        self._at = now
        sample = self._sample()
        if sample is None:
            self._last = self._cores = None
            return None
        before = self._last or (0, 0)
        if sample[0] > before[0]:
            self._cores = self.cpus * (sample[1] - before[1]) / (sample[0] - before[0])
        self._last = sample
        return self._cores

    def _sample(self) -> tuple[int, int] | None:
        """(all jiffies, idle + iowait + nice jiffies) of the machine."""
        try:
            with open(self._path, "rb") as stat:
                fields = stat.readline().split()
            user, nice, system, idle, iowait, *rest = (int(value) for value in fields[1:])
        except (OSError, ValueError):
            return None
        if fields[0] != b"cpu":
            return None
        return user + nice + system + idle + iowait + sum(rest[:3]), idle + iowait + nice
