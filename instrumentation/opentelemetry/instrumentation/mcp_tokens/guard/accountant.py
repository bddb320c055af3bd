# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard's bookkeeping, off the response path: exact removed tokens, metrics, warn logs.

The response path decides with as little counting as a decision needs, so when the guard
cut or refused a result it usually knows the original's size only roughly. The accountant
(one daemon thread, started on the first action) counts the original exactly, then adds
the action to `mcp_tokens.guard.actions` and `original - delivered` to
`mcp_tokens.guard.removed`, and puts the exact original count on the span if it is still
open. It waits `RECORD_DELAY_S` after an action before recording it, so the analysis has
usually admitted the tool's name as a label value by then (labels fold like every other
series: labels.py). At most `MAX_PENDING` actions or `MAX_PENDING_CHARS` characters of
originals wait; past that an action is recorded at once with the estimate it was decided
with (logged once).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from .results import Assessment

_logger = logging.getLogger(__name__)

RECORD_DELAY_S = 1.0
MAX_PENDING = 256
MAX_PENDING_CHARS = 64 << 20
# A tool's warnings are logged at most once per this many seconds (and at most this many
# tools are remembered for it).
WARN_LOG_INTERVAL_S = 60.0
_WARN_LOG_TOOLS = 1024


@dataclass
class Action:
    side: str
    method: str
    server_name: str | None
    tool: str | None
    action: str
    reason: str
    delivered: int
    original: int  # exact when `assessment` is None
    assessment: Assessment | None  # still to count exactly
    span: Span | None
    at: float
    weight: int = 0


class Accountant:
    def __init__(
        self,
        instruments: GuardInstruments,
        labels: ServerLabels,
        count_exactly: Callable[[Assessment], int],
        *,
        delay_s: float = RECORD_DELAY_S,
    ) -> None:
        self._instruments = instruments
        self._labels = labels
        self._count_exactly = count_exactly
        self._delay_s = delay_s
        self._pending: deque[Action] = deque()
        self._pending_chars = 0
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._warned_full = False
        self._logged: dict[str, float] = {}
        self._failures_logged: set[str] = set()

    # --- from the response path --------------------------------------------------------
    def record(self, action: Action) -> None:
        """Queue an action (never blocks; records at once if the queue is full)."""
        action.weight = _weight(action.assessment)
        with self._condition:
            if len(self._pending) < MAX_PENDING and self._pending_chars + action.weight <= MAX_PENDING_CHARS:
                self._pending.append(action)
                self._pending_chars += action.weight
                self._ensure_thread()
                self._condition.notify()
                return
        if not self._warned_full:
            self._warned_full = True
            _logger.warning("mcp-tokens: the guard's accountant is behind; removed tokens are estimated")
        action.assessment = None
        self._write(action)

    def failure(self, side: str, method: str, failure: str, error: BaseException | None) -> None:
        """The guard delivered a result unchanged because it could not act (fail open)."""
        self._instruments.failures.add(
            1, {semconv.SIDE: side, semconv.MCP_METHOD_NAME: method, semconv.GUARD_FAILURE: failure}
        )
        if failure not in self._failures_logged:
            self._failures_logged.add(failure)
            _logger.warning(
                "mcp-tokens: the guard delivered a result unchanged (%s): %s", failure, error, exc_info=error
            )

    def stop(self, timeout: float = 5.0) -> None:
        """Record everything queued now (no delay) and stop the thread."""
        with self._condition:
            self._stopping = True
            self._condition.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    # --- the thread -----------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None and not self._stopping:
            self._thread = threading.Thread(target=self._run, name="mcp-tokens-guard", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._condition:
                while not self._pending and not self._stopping:
                    self._condition.wait()
                if not self._pending:
                    return
                wait = self._pending[0].at + self._delay_s - time.monotonic()
                if wait > 0 and not self._stopping:
                    self._condition.wait(wait)
                    continue
                action = self._pending.popleft()
                self._pending_chars -= action.weight
            self._settle(action)

    def _settle(self, action: Action) -> None:
        try:
            if action.assessment is not None:
                action.original = self._count_exactly(action.assessment)
                action.assessment = None
                span = action.span
                if span is not None and span.is_recording():
                    span.set_attributes(
                        {semconv.GUARD_ORIGINAL_TOKENS: action.original, semconv.GUARD_ORIGINAL_EXACT: True}
                    )
        except Exception:
            _logger.debug("mcp-tokens could not count a guarded original exactly", exc_info=True)
        try:
            self._write(action)
        except Exception:
            _logger.debug("mcp-tokens could not record a guard action", exc_info=True)

    def _write(self, action: Action) -> None:
        server = self._labels.fold_server(action.server_name)
        attributes: dict[str, AttributeValue] = {
            semconv.SIDE: action.side,
            semconv.MCP_METHOD_NAME: action.method,
            semconv.SERVER_NAME: server,
            semconv.GUARD_ACTION: action.action,
            semconv.GUARD_REASON: action.reason,
        }
        tool = self._labels.targets(server).fold(action.tool) if action.tool else ""
        if tool:
            attributes[semconv.GEN_AI_TOOL_NAME] = tool
        self._instruments.actions.add(1, attributes)
        removed = max(0, action.original - action.delivered) if action.action != semconv.GUARD_WARNED else 0
        self._instruments.removed.add(removed, attributes)
        if action.action == semconv.GUARD_WARNED:
            self._log_warning(action)

    def _log_warning(self, action: Action) -> None:
        key = f"{action.side}:{action.server_name}:{action.tool}"
        now = time.monotonic()
        if now - self._logged.get(key, -WARN_LOG_INTERVAL_S) < WARN_LOG_INTERVAL_S:
            return
        if len(self._logged) >= _WARN_LOG_TOOLS:
            self._logged.clear()
        self._logged[key] = now
        _logger.warning(
            "mcp-tokens guard: %s %s returned %d tokens, over its limit (%s); delivered unchanged (warn)",
            action.method,
            action.tool or "",
            action.original,
            action.reason,
        )


def _weight(assessment: Assessment | None) -> int:
    if assessment is None:
        return 0
    return sum(len(entry.block.text) for entry in assessment.entries) + (
        len(assessment.structured.block.text) if assessment.structured is not None else 0
    )
