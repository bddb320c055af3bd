# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The knobs of counting: what the application holds, how long a span waits, how the service runs.

Every timing and sizing of the path from a patch's hand-off to the recorded findings is a
field here or one of the settings `QUEUE_SIZE`, `SPAN_WAIT`, `COUNTER_PROCESSES` and
`COUNTER_IDLE_TIMEOUT` (config.py); the worker, the links and the service take an `Options`
as an argument, as opentelemetry-python's BatchProcessor takes its knobs.
"""

from __future__ import annotations

from typing import NamedTuple


class Options(NamedTuple):
    # Payload characters the application holds for the counter at most (waiting to be sent,
    # or sent and not yet taken). Past it an exchange is estimated from its length; from
    # half of it the counter estimates instead of counting (it is not keeping up).
    queue_chars: int = 64 << 20
    # The worker thread lets a waiting thread (an event loop) have the GIL at least this
    # often while it encodes payloads or records findings.
    slice_s: float = 0.0005
    # About the most UTF-8 one frame carries.
    piece_bytes: int = 64 << 10
    # The worker's rounds are at least this far apart: under load one round handles the
    # exchanges and findings of many calls, and the event loop loses the GIL once for them.
    linger_s: float = 0.01

    @property
    def behind_chars(self) -> int:
        return self.queue_chars // 2


OPTIONS = Options()
