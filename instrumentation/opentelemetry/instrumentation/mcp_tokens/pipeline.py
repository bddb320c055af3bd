# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Wires patches, counting and telemetry: exchanges in, spans and metrics out.

Patches call `Pipeline.submit(exchange)` when a response completes (or fails). The worker
(worker.py) has the payloads counted (by the counting service, counting/) and hands each
exchange back exactly once: with its findings (`record`), or, when exact counting could
not have it (the queue was full, the service went away, the instrumentation stopped),
for an estimate from its length (`estimate`). Either way every payload reaches the token
metrics. A span whose findings are not back `SPAN_WAIT` after its call ends with the
estimate (`end_span_late`) and its exact count still reaches the metrics.

Estimates from length use the tokens per character that exact counts of the same kind of
payload (side, method, server and tool) showed lately, so they follow what the tools
actually return.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .config import Settings
from .counting.options import OPTIONS, Options
from .exchange import Exchange
from .labels import ServerLabels
from .telemetry import Estimate, Instruments, Recorder
from .worker import AnalysisWorker, LinkFactory, open_link

if TYPE_CHECKING:
    from .analyst import Findings
    from .engine.analysis import Analysis

_logger = logging.getLogger(__name__)


class Pipeline:
    def __init__(
        self,
        settings: Settings,
        meter: Meter,
        *,
        options: Options = OPTIONS,
        link_factory: LinkFactory = open_link,
    ) -> None:
        self.settings = settings
        # The analysis decides which tool and prompt names become label values; these fold
        # alike (it replays what the analysis admitted) for exchanges it never sees.
        self.labels = ServerLabels(settings.max_label_values)
        self.worker = AnalysisWorker(settings, self, options=options, link_factory=link_factory)
        self.recorder = Recorder(Instruments(meter), pause=self.worker.yield_gil)
        self._ratios = TokensPerChar()

    def submit(self, exchange: Exchange) -> None:
        """Hand a finished exchange to the worker; never blocks, never raises."""
        self.worker.submit(exchange)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Wait until every exchange submitted so far is recorded (seconds)."""
        return self.worker.force_flush(timeout)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Record what comes back within `timeout` seconds, then stop counting."""
        self.worker.shutdown(timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start counting now and wait until the tokenizer is loaded (tests, benchmarks: an
        application lets the first exchange start it)."""
        return self.worker.wait_ready(timeout)

    # --- the worker's sink (on its thread, or the caller's for `estimate` under overload) ---
    def record(self, exchange: Exchange, findings: Findings, send_s: float) -> None:
        if findings.error is not None:  # the analysis failed: the payloads are estimated
            self.labels.replay(findings.admitted)
            self.estimate(exchange, semconv.SKIP_ERROR)
            return
        try:
            self.labels.replay(findings.admitted)
            for direction, analysis, chars in (
                (semconv.DIRECTION_REQUEST, findings.request, exchange.request_chars),
                (semconv.DIRECTION_RESPONSE, findings.response, exchange.response_chars),
            ):
                if analysis is not None:
                    self._record_estimate(exchange, analysis, findings.backlog)
                    if analysis.exact and chars:
                        key = (
                            exchange.side.value,
                            exchange.method,
                            findings.server,
                            findings.target,
                            direction,
                        )
                        self._ratios.learn(key, chars, analysis.tokens)
            self.recorder.record_findings(exchange, findings, send_s)
            self.recorder.record_duration(exchange, self._duration_attributes(exchange, findings.target))
            if exchange.span is not None:
                self.recorder.annotate_span(exchange.span, findings)
        except Exception:
            _logger.debug("mcp-tokens could not record %s", exchange.method, exc_info=True)
            self._count_failure(exchange)
        finally:
            _end_span(exchange)

    def estimate(self, exchange: Exchange, reason: str) -> None:
        try:
            server = self.labels.fold_server(exchange.server_name)
            target = self.labels.targets(server).fold(exchange.target)
            estimate = self._estimate_of(exchange, server, target)
            self.recorder.record_estimate(exchange, estimate, reason)
            self.recorder.record_duration(exchange, self._duration_attributes(exchange, target))
            if exchange.span is not None:
                self.recorder.annotate_span_estimate(exchange.span, estimate, reason)
        except Exception:
            _logger.debug("mcp-tokens could not record an estimated exchange", exc_info=True)
        finally:
            _end_span(exchange)

    def end_span_late(self, exchange: Exchange) -> None:
        try:
            span = exchange.span
            if span is None:
                return
            server = self.labels.fold_server(exchange.server_name)
            estimate = self._estimate_of(exchange, server, self.labels.targets(server).fold(exchange.target))
            self.recorder.annotate_span_estimate(span, estimate, semconv.SPAN_LATE)
        except Exception:
            _logger.debug("mcp-tokens could not annotate a late span", exc_info=True)
        finally:
            _end_span(exchange)

    def _estimate_of(self, exchange: Exchange, server: str, target: str) -> Estimate:
        def tokens(kind: str | None, chars: int | None, direction: str) -> int | None:
            if kind is None or chars is None:
                return None
            key = (exchange.side.value, exchange.method, server, target, direction)
            return round(chars * self._ratios.ratio(key))

        return Estimate(
            server=server,
            target=target,
            request=tokens(exchange.request_kind, exchange.request_chars, semconv.DIRECTION_REQUEST),
            response=tokens(exchange.response_kind, exchange.response_chars, semconv.DIRECTION_RESPONSE),
            risk=self.settings.risk_thresholds,
        )

    def _count_failure(self, exchange: Exchange) -> None:
        try:
            self.recorder.record_skip(exchange, semconv.SKIP_ERROR)
        except Exception:
            _logger.debug("mcp-tokens could not count a failed analysis", exc_info=True)

    def _record_estimate(self, exchange: Exchange, analysis: Analysis, backlog: bool) -> None:
        """A payload that was estimated is counted as skipped, with the reason why."""
        if analysis.exact:
            return
        if analysis.error is not None:
            reason = semconv.SKIP_ERROR
        elif backlog:
            reason = semconv.SKIP_BACKLOG
        elif analysis.encoding == "estimate" or self._tokenizer_inexact():
            reason = semconv.SKIP_NO_TOKENIZER
        else:
            reason = semconv.SKIP_OVER_MAX_BYTES
        self.recorder.record_skip(exchange, reason)

    def _tokenizer_inexact(self) -> bool:
        # A Claude encoding without ctok counts with its estimate under its own name.
        status = self.worker.status
        return status is not None and not status.exact

    def _duration_attributes(self, exchange: Exchange, target: str) -> dict[str, AttributeValue]:
        # Empty values would become empty OTLP attributes (Prometheus drops them anyway).
        attributes: dict[str, AttributeValue] = {
            key: value for key, value in exchange.metric_attributes.items() if value not in ("", None)
        }
        attributes[semconv.MCP_METHOD_NAME] = exchange.method
        if target:
            attributes[semconv.target_attribute(exchange.method)] = target
        if exchange.method == "tools/call":
            attributes[semconv.GEN_AI_OPERATION_NAME] = semconv.GEN_AI_OPERATION_EXECUTE_TOOL
        if exchange.error_type is not None:
            attributes[semconv.ERROR_TYPE] = exchange.error_type
        return attributes


_RatioKey = tuple[str, str, str, str, str]  # side, method, server, tool, direction


class TokensPerChar:
    """Tokens per payload character, learned from exact counts: per (side, method, server,
    tool, direction), else per (side, method, direction), else `DEFAULT`. Each is a moving
    average; at most `MAX_KEYS` are kept (least recently used go first)."""

    # Characters here are those of a payload's strings (engine.blocks.payload_weight), so
    # keys and JSON punctuation are not in them: a little above prose's 1 token per 4.
    DEFAULT = 0.3
    MAX_KEYS = 1024
    WEIGHT = 0.2  # of the newest exact count in the average

    def __init__(self) -> None:
        self._ratios: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._lock = threading.Lock()

    def learn(self, key: _RatioKey, chars: int, tokens: int) -> None:
        observed = tokens / chars
        with self._lock:
            for known in (key, _coarse(key)):
                previous = self._ratios.pop(known, None)
                self._ratios[known] = (
                    observed if previous is None else previous + self.WEIGHT * (observed - previous)
                )
            while len(self._ratios) > self.MAX_KEYS:
                self._ratios.popitem(last=False)

    def ratio(self, key: _RatioKey) -> float:
        with self._lock:
            for known in (key, _coarse(key)):
                value = self._ratios.get(known)
                if value is not None:
                    return value
        return self.DEFAULT


def _coarse(key: _RatioKey) -> tuple[str, ...]:
    side, method, _, _, direction = key
    return (side, method, direction)


def _end_span(exchange: Exchange) -> None:
    span: Span | None = exchange.span
    if span is None or not exchange.end_span:
        exchange.span = None
        return
    exchange.span = None  # ended: a late record leaves it alone
    run_before_end(exchange)
    try:
        span.end(end_time=exchange.end_ns or None)
    except Exception:
        _logger.debug("mcp-tokens could not end a span", exc_info=True)


def run_before_end(exchange: Exchange) -> None:
    """What the patch left to do to the exchange's span before it ends; never raises."""
    before_end, exchange.before_end = exchange.before_end, None
    if before_end is not None:
        try:
            before_end()
        except Exception:
            _logger.debug("mcp-tokens could not annotate a span", exc_info=True)
