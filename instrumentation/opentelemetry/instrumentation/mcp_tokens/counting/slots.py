# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How the service's supervisor knows whether anyone still uses it.

Each counting process writes, into its own slot of a shared anonymous mapping made before
the fork, how many clients it serves and when (`time.monotonic()`, one clock for every
process of the machine) it last had one or finished a job. The supervisor reads them to
decide when the service has been idle long enough to exit. A slot is two doubles written
by one process and read by one other: a torn read moves an idle exit by one look at most.
"""

from __future__ import annotations

import mmap
import time

_DOUBLES = 2  # clients, last activity


class Slots:
    def __init__(self, count: int) -> None:
        self._map = mmap.mmap(-1, max(1, count) * _DOUBLES * 8)  # MAP_SHARED | MAP_ANONYMOUS
        self._values = memoryview(self._map).cast("d")
        self._count = count
        for index in range(count):
            self.set_clients(index, 0)

    def set_clients(self, index: int, clients: int) -> None:
        self._values[index * _DOUBLES] = clients
        self.touch(index)

    def touch(self, index: int) -> None:
        self._values[index * _DOUBLES + 1] = time.monotonic()

    def clients(self) -> int:
        return int(sum(self._values[index * _DOUBLES] for index in range(self._count)))

    def last_activity(self) -> float:
        return max(self._values[index * _DOUBLES + 1] for index in range(self._count))
