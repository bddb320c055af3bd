"""How much CPU the analysis may take while the application's MCP calls go on.

Under sustained load (calls back to back, no quiet moment to wait for) the analysis helper
competes with the application for the CPU. Even at nice 19 a counting helper costs the
calls on the cores they need: a 2-core machine running an instrumented stdio client and
server back to back, with 50 KB results, went from 2.8 to 5.8 ms at p99 when the two
helpers counted alongside the calls. So the helper may take idle CPU only: the machine's
idle cores (Linux /proc/stat, over the last second; nice time counts as idle, it is the
helpers') beyond those kept free for the application's wake-ups (`KEEP_FREE_CORES`, or
half the machine's cores if that is fewer), at most `HELPER_MAX_SHARE` of a core. On a
machine without that much idle the share is none, and what the analysis cannot take is
dropped and counted (`mcp_tokens.analysis.skipped`, reason `overload`). Where /proc/stat
cannot be read: `HELPER_SHARE`.

The worker (worker.py) sends the helper only what the share allows (`CpuShare`, priced by
`HelperCost`), and publishes the share on the activity board (activity.py): the helper
(helper.py) counts alongside the calls only while the share is more than none.
"""

from __future__ import annotations

import os
import time

HELPER_MAX_SHARE = 0.5
HELPER_SHARE = 0.1
KEEP_FREE_CORES = 2.0
# How much of its share the helper may bank while calls pause (a share of none banks
# nothing), and how often the machine's idle CPU is read.
HELPER_BANK_S = 1.0
SPARE_EVERY_S = 1.0


class SpareCpu:
    """The machine's idle cores over the last `SPARE_EVERY_S` (Linux), read at most that
    often: since boot at the first reading; None where /proc/stat cannot be read."""

    def __init__(self, path: str = "/proc/stat") -> None:
        self._path = path
        self.cpus = os.cpu_count() or 1
        self._at = 0.0
        self._last: tuple[int, int] | None = None
        self._cores: float | None = None

    def cores(self) -> float | None:
        now = time.monotonic()
        if self._last is not None and now - self._at < SPARE_EVERY_S:
            return self._cores
        self._at = now
        sample = self._sample()
        if sample is None:
            self._last = self._cores = None
            return None
        before = self._last if self._last is not None else (0, 0)
        if sample[0] > before[0]:
            total, idle = sample[0] - before[0], sample[1] - before[1]
            self._cores = self.cpus * idle / total
        self._last = sample
        return self._cores

    def _sample(self) -> tuple[int, int] | None:
        """(all jiffies, idle + iowait + nice jiffies) of the machine."""
        try:
            with open(self._path, "rb") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        if len(fields) < 6 or fields[0] != b"cpu":
            return None
        try:
            user, nice, system, idle, iowait, *rest = (int(value) for value in fields[1:])
        except ValueError:
            return None
        return user + nice + system + idle + iowait + sum(rest[:3]), idle + iowait + nice


def helper_share(spare_cores: float | None, cpus: int) -> float:
    """The share of a core the helper may take beside calls in flight."""
    if spare_cores is None:
        return HELPER_SHARE
    keep_free = min(KEEP_FREE_CORES, cpus / 2)
    return max(0.0, min(HELPER_MAX_SHARE, spare_cores - keep_free))


class CpuShare:
    """A token bucket of CPU seconds: `share` of a core, what it earns in `bank_s` at most
    in hand (it starts full)."""

    def __init__(self, share: float, bank_s: float) -> None:
        self.share = share
        self._bank_s = bank_s
        self._credit = share * bank_s
        self._at = time.monotonic()

    def take(self, cost_s: float) -> bool:
        """Spend `cost_s` if there is credit left (it may go below zero once)."""
        now = time.monotonic()
        cap = self.share * self._bank_s
        self._credit = min(cap, self._credit + (now - self._at) * self.share)
        self._at = now
        if self._credit <= 0:
            return False
        self._credit -= cost_s
        return True


class HelperCost:
    """What the helper's analysis of an exchange costs, learnt from its findings: CPU
    seconds per character (plus a fixed part), averaged over the recent exchanges."""

    FIXED_CHARS = 1000
    SMOOTHING = 0.1

    def __init__(self, seconds_per_char: float = 1.25e-7) -> None:
        self._seconds_per_char = seconds_per_char

    def of(self, weight: int) -> float:
        return self._seconds_per_char * (weight + self.FIXED_CHARS)

    def observe(self, analysis_s: float, weight: int) -> None:
        if analysis_s > 0:
            rate = analysis_s / (weight + self.FIXED_CHARS)
            self._seconds_per_char += self.SMOOTHING * (rate - self._seconds_per_char)
