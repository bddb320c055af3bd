# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The analysis on the worker's own thread, where no counting service can run.

No interpreter to start a service with (an embedded or frozen application), a platform
without Unix sockets or peer credentials, a directory no service can use (a read-only file
system), or `OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS=thread`: the worker analyses each
exchange itself, with a tokenizer of this process, tokenising 16 Ki characters at a time
and handing the GIL over between pieces. It then shares the GIL and the CPU with the
application.
"""

from __future__ import annotations

from collections.abc import Callable

from .analyst import Analyst, AnalystStatus, Counters, Findings, job_of
from .config import Settings
from .counting.client import spec_of
from .engine.tokenizer import TokenizerLoader
from .exchange import Exchange

_CHUNK_CHARS = 1 << 14


class ThreadLink:
    unsent = 0

    def __init__(self, settings: Settings, pause: Callable[[], None]) -> None:
        self._settings = settings
        self._pause = pause
        self._loader = TokenizerLoader(spec_of(settings))
        self._loader.start()  # on a thread of its own
        self._analyst: Analyst | None = None
        self._arrived: list[Findings] = []
        self.status: AnalystStatus | None = None

    def _ready_analyst(self) -> Analyst:
        if self._analyst is None:
            counters = Counters.from_loader(
                self._loader, threads=1, chunk_chars=_CHUNK_CHARS, pause=self._pause
            )
            self._analyst = Analyst(self._settings, counters)
            self.status = counters.status
        return self._analyst

    def send(self, exchange: Exchange, seq: int, behind: bool) -> None:
        job = job_of(exchange, seq, behind)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        self._arrived.append(self._ready_analyst().analyse(job, request, response))

    def flush(self) -> None:
        return None

    def receive(self) -> list[Findings]:
        if self.status is None and self._loader.ready():
            self._ready_analyst()
        arrived, self._arrived = self._arrived, []
        return arrived

    def fileno(self) -> int | None:
        return None

    def close(self) -> None:
        self._arrived = []
