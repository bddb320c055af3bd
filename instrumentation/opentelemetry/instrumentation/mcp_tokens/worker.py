"""The bounded background worker that takes token analysis off the response path.

`submit()` never blocks and never raises: it appends to a bounded deque and wakes the
worker thread. When the queue is full (by count, or by the characters its payloads hold)
the exchange is handed to `on_overflow` instead, which records it as skipped: under
overload we drop analyses rather than slow the application down or grow memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from .engine.blocks import payload_chars
from .exchange import Exchange

_logger = logging.getLogger(__name__)


class AnalysisWorker:
    def __init__(
        self,
        process: Callable[[Exchange], None],
        on_overflow: Callable[[Exchange], None],
        *,
        max_pending: int = 1024,
        max_pending_chars: int = 256 << 20,
    ) -> None:
        self._process = process
        self._on_overflow = on_overflow
        self._max_pending = max_pending
        self._max_pending_chars = max_pending_chars
        self._queue: deque[tuple[Exchange, int]] = deque()
        self._pending_chars = 0
        self._busy = False
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def start(self) -> None:
        with self._condition:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._run, name="mcp-tokens-analysis", daemon=True)
            self._thread.start()

    def submit(self, exchange: Exchange) -> None:
        handled = False  # queued, or handed to on_overflow: exactly one of the two, once
        try:
            weight = payload_chars(exchange.request) + payload_chars(exchange.response)
            with self._condition:
                accepted = (
                    not self._stopping
                    and len(self._queue) < self._max_pending
                    and self._pending_chars + weight <= self._max_pending_chars
                )
                if accepted:
                    self._queue.append((exchange, weight))
                    handled = True
                    self._pending_chars += weight
                    self._condition.notify()
            if not accepted:
                handled = True
                self._on_overflow(exchange)
        except Exception:  # the caller's MCP call must never see our failure
            _logger.debug("mcp-tokens could not queue an exchange", exc_info=True)
            if not handled:
                self._drop(exchange)

    def _drop(self, exchange: Exchange) -> None:
        """An exchange we failed to queue still goes to `on_overflow`, which ends its span."""
        try:
            self._on_overflow(exchange)
        except Exception:
            _logger.debug("mcp-tokens could not drop an exchange", exc_info=True)

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every queued exchange is processed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._condition:
            while self._queue or self._busy:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._condition.wait(remaining)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Process what is queued (up to `timeout`), then stop; leftovers go to on_overflow."""
        self.drain(timeout)
        with self._condition:
            self._stopping = True
            leftovers = [exchange for exchange, _ in self._queue]
            self._queue.clear()
            self._pending_chars = 0
            self._condition.notify_all()
        for exchange in leftovers:
            self._on_overflow(exchange)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._queue and not self._stopping:
                    self._condition.wait()
                if self._stopping and not self._queue:
                    return
                exchange, weight = self._queue.popleft()
                self._busy = True
            try:
                self._process(exchange)
            except Exception:
                _logger.debug("mcp-tokens analysis failed", exc_info=True)
            finally:
                with self._condition:
                    self._pending_chars -= weight
                    self._busy = False
                    self._condition.notify_all()
