"""Wires patches, analysis and telemetry: exchanges in, analysed spans and metrics out.

Patches call `Pipeline.submit(exchange)` when a response completes (or fails). The
worker (worker.py) sends the exchange's wire payloads to the analysis (analyst.py, in a
helper process), and when its findings come back, the pipeline records the metrics,
annotates the span and ends it at the time the response completed. The analysis starts
with the first exchange; counts are deferred while its tokenizer loads, never estimated
because of start-up.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING

from opentelemetry.metrics import Meter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .config import Settings
from .exchange import Exchange
from .gil import yield_gil
from .labels import ServerLabels
from .pacing import PACING, Pacing
from .telemetry import Instruments, Recorder
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
        pacing: Pacing = PACING,
        link_factory: LinkFactory = open_link,
    ) -> None:
        self.settings = settings
        # The analysis decides which tool and prompt names become label values; these fold
        # alike (it replays what the analysis admitted) for exchanges it never sees.
        self.labels = ServerLabels(settings.max_label_values)
        self.recorder = Recorder(Instruments(meter), pause=functools.partial(yield_gil, pacing))
        self.worker = AnalysisWorker(
            settings, self._record, self._skip, pacing=pacing, link_factory=link_factory
        )

    def submit(self, exchange: Exchange) -> None:
        """Hand a finished exchange to the worker; never blocks, never raises."""
        self.worker.submit(exchange)

    def force_flush(self, timeout: float | None = None) -> bool:
        """Wait until every exchange submitted so far is recorded or skipped (seconds)."""
        return self.worker.force_flush(timeout)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Record what is in hand (up to `timeout` seconds), then stop the analysis."""
        self.worker.shutdown(timeout)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Start the analysis now and wait until it has loaded its tokenizer (tests,
        benchmarks: an application lets the first exchange start it)."""
        return self.worker.wait_ready(timeout)

    # --- on the worker thread --------------------------------------------------------------
    def _record(self, exchange: Exchange, findings: Findings, send_s: float) -> None:
        try:
            self.labels.replay(findings.admitted)
            if findings.error is not None:
                self.recorder.record_skip(exchange, semconv.SKIP_ERROR)
            for analysis in (findings.request, findings.response):
                if analysis is not None:
                    self._record_estimate(exchange, analysis, findings.backlog)
            self.recorder.record_findings(exchange, findings, send_s)
            self.recorder.record_duration(exchange, self._duration_attributes(exchange, findings.target))
            self.recorder.pause()
            if exchange.span is not None:
                self.recorder.annotate_span(exchange.span, findings)
                self.recorder.pause()
        except Exception:
            _logger.debug("mcp-tokens could not record %s", exchange.method, exc_info=True)
            self._count_failure(exchange)
        finally:
            _end_span(exchange)

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

    # --- exchanges the analysis does not take ------------------------------------------------
    def _skip(self, exchange: Exchange, reason: str) -> None:
        """Runs on the caller's path when the queue is full: counts, the operation's
        duration and the span's end, nothing more."""
        try:
            server = self.labels.fold_server(exchange.server_name)
            target = self.labels.targets(server).fold(exchange.target)
            self.recorder.record_skip(exchange, reason)
            self.recorder.record_duration(exchange, self._duration_attributes(exchange, target))
            if exchange.span is not None and exchange.span.is_recording():
                exchange.span.set_attribute(semconv.TOKENS_SKIPPED, reason)
        except Exception:
            _logger.debug("mcp-tokens could not record a skipped exchange", exc_info=True)
        finally:
            _end_span(exchange)


def _end_span(exchange: Exchange) -> None:
    span: Span | None = exchange.span
    if span is None or not exchange.end_span:
        return
    try:
        span.end(end_time=exchange.end_ns or None)
    except Exception:
        _logger.debug("mcp-tokens could not end a span", exc_info=True)
