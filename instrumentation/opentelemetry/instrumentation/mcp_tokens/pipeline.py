"""Wires the engine to telemetry: exchanges in, analysed spans and metrics out.

Patches call `Pipeline.submit(exchange)` when a response completes (or fails). The
worker thread then analyses the wire payloads with the exact tokenizer (waiting for it
to load if it must: counts are deferred, never estimated because of start-up), charges
the budget scope, records the metrics, annotates the span and ends it at the time the
response completed.
"""

from __future__ import annotations

import contextlib
import logging
import time

from opentelemetry.metrics import Meter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .config import Settings
from .engine.analysis import Analysis, Analyzer, AnalyzerOptions, PayloadKind
from .engine.blocks import payload_weight
from .engine.estimate import EstimateTokenizer
from .engine.ledger import BudgetLedger, BudgetSnapshot
from .engine.tokenizer import TokenCounter, TokenizerLoader, TokenizerSpec
from .exchange import BUDGETED_METHODS, Exchange, Side
from .labels import LabelFolder, ServerLabels
from .telemetry import Instruments, Outcome, Recorder
from .worker import AnalysisWorker, sliced, yield_gil

_logger = logging.getLogger(__name__)

# Characters tokenised per call of the worker's counter: under 1 ms of tokenizer time.
COUNT_CHUNK_CHARS = 1 << 14
# Exchanges this light are analysed without `sliced` pauses within a step: their whole
# analysis holds the GIL for well under 1 ms, and the profile hook that makes the pauses
# would double its cost (a hook call at every function call and return). Heavier ones,
# by characters or by values (a listing of 20,000 tools holds few characters a value), are
# sliced.
SLICE_FROM_CHARS = 8 << 10
SLICE_FROM_NODES = 256

SKIP_OVERLOAD = "overload"
SKIP_BACKLOG = "backlog"
SKIP_OVER_MAX_BYTES = "over_max_bytes"
SKIP_NO_TOKENIZER = "no_exact_tokenizer"
SKIP_ERROR = "analysis_error"
SKIP_SHUTDOWN = "shutdown"


class Pipeline:
    def __init__(self, settings: Settings, meter: Meter) -> None:
        self.settings = settings
        self.loader = TokenizerLoader(
            TokenizerSpec(settings.encoding, settings.tokenizer_file, settings.tokenizer_pattern)
        )
        # One ledger per side: a process that is both the client and the server of a
        # session (in-memory transports) must not charge one scope twice.
        self.ledgers = {
            side: BudgetLedger(
                context_window=settings.context_window,
                thresholds=settings.budget_thresholds,
                max_scopes=settings.max_scopes,
                idle_ttl=settings.scope_idle_ttl,
            )
            for side in Side
        }
        self.labels = ServerLabels(settings.max_label_values)
        self.recorder = Recorder(
            Instruments(meter),
            capture_content=settings.capture_content,
            content_max_chars=settings.content_max_chars,
        )
        self.worker = AnalysisWorker(
            self._process,
            self._skip_overloaded,
            on_backlog=self._estimate_backlog,
            max_pending=settings.queue_size,
        )
        self._analyzer: Analyzer | None = None
        self._estimator: Analyzer | None = None

    def start(self) -> None:
        self.loader.start()
        self.worker.start()

    def shutdown(self, timeout: float = 5.0) -> None:
        self.worker.stop(timeout)

    def submit(self, exchange: Exchange) -> None:
        """Hand a finished exchange to the worker; never blocks, never raises."""
        self.worker.submit(exchange)

    # --- on the worker thread --------------------------------------------------------------
    def analyzer(self) -> Analyzer:
        if self._analyzer is None:
            tokenizer = self.loader.tokenizer()
            # One counting thread: a second one would finish a long text sooner but take a
            # core the application may need (the worker is background work). Short chunks
            # (a few ms of tokenizing each) let the worker pause for calls in flight.
            counter = TokenCounter(
                tokenizer, max_bytes=self.settings.max_bytes, threads=1, chunk_chars=COUNT_CHUNK_CHARS
            )
            self._analyzer = Analyzer(counter, self._analyzer_options())
        return self._analyzer

    def estimator(self) -> Analyzer:
        """The analyzer for exchanges the worker is too far behind on to count exactly: the
        content-aware estimate costs a small fraction of tokenizing (see engine/estimate.py)."""
        if self._estimator is None:
            # No cache: an estimate costs about what a lookup does, and a second cache would
            # keep another 8 Mi characters of texts alive.
            counter = TokenCounter(
                EstimateTokenizer(), max_bytes=self.settings.max_bytes, threads=1, cache_entries=0
            )
            self._estimator = Analyzer(counter, self._analyzer_options())
        return self._estimator

    def _analyzer_options(self) -> AnalyzerOptions:
        return AnalyzerOptions(
            risk_thresholds=self.settings.risk_thresholds,
            image_model=self.settings.image_model,
            overhead_pattern=self.settings.overhead_pattern,
            detect_padding=self.settings.padding,
        )

    def _estimate_backlog(self, exchange: Exchange) -> None:
        # Exchanges that queued while the tokenizer loaded are counted (start-up is not
        # overload), and without an exact tokenizer there is nothing cheaper to fall back to.
        loaded_ns = self.loader.loaded_ns
        after_start_up = loaded_ns != 0 and exchange.end_ns >= loaded_ns
        self._process(exchange, backlog=after_start_up and self.analyzer().counter.exact)

    def _process(self, exchange: Exchange, backlog: bool = False) -> None:
        try:
            # Pauses between the steps keep each stretch of Python short (see worker.py), and
            # within the steps when the payload is large enough to need them.
            with sliced() if _needs_slicing(exchange) else contextlib.nullcontext():
                outcome = self._analyse(exchange, backlog)
                yield_gil()
                self.recorder.record_outcome(outcome)
                yield_gil()
                self.recorder.record_duration(exchange, self._duration_attributes(exchange, outcome.target))
                if exchange.span is not None:
                    self.recorder.annotate_span(exchange.span, outcome)
            yield_gil()
        except Exception:
            _logger.debug("mcp-tokens could not analyse %s", exchange.method, exc_info=True)
            self.recorder.record_skip(exchange, SKIP_ERROR)
        finally:
            _end_span(exchange)

    def _analyse(self, exchange: Exchange, backlog: bool) -> Outcome:
        # CPU time of this thread (counting runs on it): pauses are not cost.
        started = time.thread_time()
        analyzer = self.estimator() if backlog else self.analyzer()
        request = _analyse_part(analyzer, exchange.request_kind, exchange.request)
        response = _analyse_part(analyzer, exchange.response_kind, exchange.response)
        server = self.labels.server(exchange.server_name)
        targets = self.labels.targets(server)
        if response is not None and exchange.method == "tools/list":
            for name, _ in response.tool_definitions:
                targets.admit(name)
        if exchange.target and exchange.error_type is None:
            targets.admit(exchange.target)
        for analysis in (request, response):
            if analysis is not None:
                self._record_estimates(exchange, analysis, backlog)
        budget = self._charge_budget(exchange, exchange.server_name or server, request, response)
        return Outcome(
            exchange=exchange,
            server=server,
            target=targets.fold(exchange.target),
            request=request,
            response=response,
            budget=budget,
            definitions=_folded_definitions(response, targets) if exchange.method == "tools/list" else None,
            analysis_s=time.thread_time() - started,
        )

    def _charge_budget(
        self, exchange: Exchange, server: str, request: Analysis | None, response: Analysis | None
    ) -> BudgetSnapshot | None:
        ref = exchange.budget
        if ref is None or exchange.method not in BUDGETED_METHODS:
            return None
        window = ref.context_window
        ledger = self.ledgers[exchange.side]
        if exchange.method == "tools/list" and response is not None:
            return ledger.set_definitions(ref.key, server, response.tokens, context_window=window)
        tokens = sum(a.tokens for a in (request, response) if a is not None)
        return ledger.add(ref.key, tokens, context_window=window)

    def _record_estimates(self, exchange: Exchange, analysis: Analysis, backlog: bool) -> None:
        if analysis.exact:
            return
        if analysis.error is not None:
            reason = SKIP_ERROR
        elif backlog:
            reason = SKIP_BACKLOG
        elif analysis.encoding == "estimate":
            reason = SKIP_NO_TOKENIZER
        else:
            reason = SKIP_OVER_MAX_BYTES
        self.recorder.record_skip(exchange, reason)

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

    # --- when the worker cannot take it ------------------------------------------------------
    def _skip_overloaded(self, exchange: Exchange) -> None:
        try:
            server = self.labels.server(exchange.server_name)
            target = self.labels.targets(server).fold(exchange.target)
            self.recorder.record_skip(exchange, SKIP_OVERLOAD)
            self.recorder.record_duration(exchange, self._duration_attributes(exchange, target))
            if exchange.span is not None and exchange.span.is_recording():
                exchange.span.set_attribute(semconv.TOKENS_SKIPPED, SKIP_OVERLOAD)
        except Exception:
            _logger.debug("mcp-tokens could not record a skipped exchange", exc_info=True)
        finally:
            _end_span(exchange)


def _folded_definitions(response: Analysis | None, targets: LabelFolder) -> dict[str, int] | None:
    """Definition tokens per tool label; tools folded into `_OTHER` add up there."""
    if response is None:
        return None
    definitions: dict[str, int] = {}
    for name, tokens in response.tool_definitions:
        label = targets.fold(name)
        definitions[label] = definitions.get(label, 0) + tokens
    return definitions


def _needs_slicing(exchange: Exchange) -> bool:
    request, response = payload_weight(exchange.request), payload_weight(exchange.response)
    return (
        request.chars + response.chars >= SLICE_FROM_CHARS
        or request.nodes + response.nodes >= SLICE_FROM_NODES
    )


def _analyse_part(analyzer: Analyzer, kind: PayloadKind | None, payload: object) -> Analysis | None:
    if kind is None or payload is None:
        return None
    return analyzer.analyze(kind, payload)


def _end_span(exchange: Exchange) -> None:
    span: Span | None = exchange.span
    if span is None or not exchange.end_span:
        return
    try:
        span.end(end_time=exchange.end_ns or None)
    except Exception:
        _logger.debug("mcp-tokens could not end a span", exc_info=True)
