"""The analysis on the worker's own thread, where no helper process runs.

No interpreter to start (an embedded or frozen application), a helper that died before it
was ready, or `OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS=thread`: the worker analyses each
exchange itself as it sends it, tokenising `Pacing.thread_chunk_chars` at a time on one
thread and handing the GIL over every `slice_s` (with pauses inside steps for heavy
payloads, `gil.sliced`). It then shares the GIL and the CPU with the application.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

from .analyst import Analyst, AnalystStatus, Findings, job_of
from .config import Settings
from .exchange import Exchange
from .gil import needs_slicing, sliced, yield_gil
from .link import LinkClosed
from .pacing import PACING, Pacing


class ThreadLink:
    def __init__(self, settings: Settings, pacing: Pacing = PACING) -> None:
        self._pacing = pacing
        self._analyst = Analyst(
            settings,
            pacing,
            counting_threads=1,
            chunk_chars=pacing.thread_chunk_chars,
            pause=functools.partial(yield_gil, pacing),
        )
        self._analyst.start()  # loads the tokenizer on a thread of its own
        self._status: AnalystStatus | None = None
        self._arrived: list[Findings] = []
        self._closed = False

    @property
    def status(self) -> AnalystStatus | None:
        if self._status is None and self._analyst.loader.ready():
            self._status = self._analyst.status()
        return self._status

    def sender(self, exchange: Exchange, seq: int, behind: bool) -> Iterator[bool]:
        if self._closed:
            raise LinkClosed("the analysis stopped")
        job = job_of(exchange, seq, behind)
        request = exchange.request if job.request_kind is not None else None
        response = exchange.response if job.response_kind is not None else None
        heavy = needs_slicing(request, response, self._pacing)
        with sliced(self._pacing) if heavy else contextlib.nullcontext():
            findings = self._analyst.analyse(job, request, response)
        del request, response
        self._arrived.append(findings)
        yield True

    def flush(self) -> bool:
        return True

    def receive(self) -> list[Findings]:
        arrived, self._arrived = self._arrived, []
        return arrived

    def wait(self, timeout: float) -> None:
        # Findings arrive as they are sent; only the tokenizer's loading is waited for.
        if self._status is None:
            self._analyst.loader.wait(timeout)

    def close(self, timeout: float = 2.0) -> None:
        self._closed = True

    def forget(self) -> None:
        self._closed = True
