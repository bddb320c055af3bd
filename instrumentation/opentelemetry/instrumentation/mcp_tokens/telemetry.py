"""Creates the instruments once and records an analysed exchange onto its span and metrics."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from opentelemetry.metrics import Meter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .engine.analysis import Analysis
from .engine.compact import compact_json
from .engine.ledger import BudgetSnapshot
from .exchange import Exchange, Side
from .labels import clean_text


@dataclass(frozen=True)
class Outcome:
    """What the pipeline learned about one exchange."""

    exchange: Exchange
    server: str
    target: str
    request: Analysis | None = None
    response: Analysis | None = None
    budget: BudgetSnapshot | None = None
    # tools/list only: definition tokens per (folded) tool label.
    definitions: dict[str, int] | None = None
    analysis_s: float = 0.0


class Instruments:
    """Every metric instrument of the contract (docs/telemetry.md), created once."""

    def __init__(self, meter: Meter) -> None:
        self.client_duration = meter.create_histogram(
            semconv.CLIENT_OPERATION_DURATION,
            unit="s",
            description="Duration of MCP requests as seen by the client.",
            explicit_bucket_boundaries_advisory=semconv.DURATION_BUCKETS,
        )
        self.server_duration = meter.create_histogram(
            semconv.SERVER_OPERATION_DURATION,
            unit="s",
            description="Duration of MCP requests as seen by the server.",
            explicit_bucket_boundaries_advisory=semconv.DURATION_BUCKETS,
        )
        self.client_session_duration = meter.create_histogram(
            semconv.CLIENT_SESSION_DURATION,
            unit="s",
            description="Duration of MCP sessions as seen by the client.",
            explicit_bucket_boundaries_advisory=semconv.DURATION_BUCKETS,
        )
        self.server_session_duration = meter.create_histogram(
            semconv.SERVER_SESSION_DURATION,
            unit="s",
            description="Duration of MCP sessions as seen by the server.",
            explicit_bucket_boundaries_advisory=semconv.DURATION_BUCKETS,
        )
        self.payload = meter.create_histogram(
            semconv.PAYLOAD,
            unit="{token}",
            description="Tokens of MCP payloads a model is shown, per request or response.",
            explicit_bucket_boundaries_advisory=semconv.TOKEN_BUCKETS,
        )
        self.overhead = meter.create_counter(
            semconv.OVERHEAD, unit="{token}", description="Tokens that carry no data, by kind."
        )
        self.responses = meter.create_counter(
            semconv.RESPONSES, unit="{response}", description="Analysed responses, by risk tier."
        )
        self.tool_definition = meter.create_gauge(
            semconv.TOOL_DEFINITION,
            unit="{token}",
            description="Tokens of each tool's definition in the latest tools/list.",
        )
        self.budget_utilization = meter.create_histogram(
            semconv.BUDGET_UTILIZATION_METRIC,
            unit="1",
            description="Share of the budget scope's context window used, after each exchange.",
            explicit_bucket_boundaries_advisory=semconv.UTILIZATION_BUCKETS,
        )
        self.budget_crossings = meter.create_counter(
            semconv.BUDGET_CROSSINGS,
            unit="{scope}",
            description="Budget scopes that reached the warning or critical level.",
        )
        self.padding = meter.create_counter(
            semconv.PADDING_DETECTIONS,
            unit="{detection}",
            description="Adversarial padding findings in MCP payloads, by reason.",
        )
        self.analysis_duration = meter.create_histogram(
            semconv.ANALYSIS_DURATION,
            unit="s",
            description="CPU time mcp-tokens spent analysing one exchange, off the response path.",
            explicit_bucket_boundaries_advisory=semconv.ANALYSIS_BUCKETS,
        )
        self.analysis_skipped = meter.create_counter(
            semconv.ANALYSIS_SKIPPED,
            unit="{payload}",
            description="Payloads mcp-tokens estimated or skipped instead of counting exactly, by reason.",
        )


class Recorder:
    """Writes outcomes onto spans and instruments."""

    def __init__(self, instruments: Instruments, *, capture_content: bool, content_max_chars: int) -> None:
        self._instruments = instruments
        self._capture_content = capture_content
        self._content_max_chars = content_max_chars
        # Tool labels of each (side, server)'s latest listing; bounded by label folding.
        self._listed: dict[tuple[str, str], set[str]] = {}
        self._lock = threading.Lock()

    # --- metrics ------------------------------------------------------------------------
    def record_duration(self, exchange: Exchange, attributes: Mapping[str, AttributeValue]) -> None:
        side = exchange.operation_side or exchange.side
        histogram = (
            self._instruments.client_duration if side is Side.CLIENT else self._instruments.server_duration
        )
        histogram.record(exchange.duration_s, attributes)

    def record_session(self, side: Side, duration_s: float, attributes: Mapping[str, AttributeValue]) -> None:
        """A finished MCP session (ClientSession, server connection) and how long it lasted."""
        histogram = (
            self._instruments.client_session_duration
            if side is Side.CLIENT
            else self._instruments.server_session_duration
        )
        histogram.record(max(0.0, duration_s), attributes)

    def record_skip(self, exchange: Exchange, reason: str) -> None:
        self._instruments.analysis_skipped.add(
            1,
            {
                semconv.SIDE: exchange.side.value,
                semconv.MCP_METHOD_NAME: exchange.method,
                semconv.SKIP_REASON: reason,
            },
        )

    def record_outcome(self, outcome: Outcome) -> None:
        exchange = outcome.exchange
        side = exchange.side.value
        base = {
            semconv.SIDE: side,
            semconv.MCP_METHOD_NAME: exchange.method,
            semconv.SERVER_NAME: outcome.server,
        }
        if outcome.target:
            base[semconv.target_attribute(exchange.method)] = outcome.target
        for direction, analysis in (
            (semconv.DIRECTION_REQUEST, outcome.request),
            (semconv.DIRECTION_RESPONSE, outcome.response),
        ):
            if analysis is not None:
                self._record_analysis(analysis, {**base, semconv.DIRECTION: direction})
        if outcome.definitions is not None:
            self._record_definitions(side, outcome.server, outcome.definitions)
        if outcome.budget is not None:
            self._record_budget(outcome.budget, side, outcome.server)
        self._instruments.analysis_duration.record(
            outcome.analysis_s, {semconv.SIDE: side, semconv.MCP_METHOD_NAME: exchange.method}
        )

    def _record_definitions(self, side: str, server: str, definitions: dict[str, int]) -> None:
        # A gauge series cannot be deleted: a tool that left the listing is set to 0 so the
        # server's definition tax (a sum over tools) stays true.
        with self._lock:
            previous = self._listed.get((side, server), set())
            self._listed[(side, server)] = set(definitions)
        for name in previous - set(definitions):
            definitions = {**definitions, name: 0}
        for name, tokens in definitions.items():
            self._instruments.tool_definition.set(
                tokens, {semconv.SIDE: side, semconv.SERVER_NAME: server, semconv.GEN_AI_TOOL_NAME: name}
            )

    def _record_analysis(self, analysis: Analysis, attributes: dict[str, AttributeValue]) -> None:
        attributes[semconv.TOKENS_ENCODING] = analysis.encoding
        self._instruments.payload.record(analysis.tokens, attributes)
        for kind, tokens in analysis.overhead:
            self._instruments.overhead.add(tokens, {**attributes, semconv.OVERHEAD_KIND: kind.value})
        if attributes[semconv.DIRECTION] == semconv.DIRECTION_RESPONSE:
            self._instruments.responses.add(1, {**attributes, semconv.TOKENS_RISK: analysis.risk.value})
        for finding in analysis.padding:
            padding_attributes = {
                semconv.SIDE: attributes[semconv.SIDE],
                semconv.MCP_METHOD_NAME: attributes[semconv.MCP_METHOD_NAME],
                semconv.PADDING_REASON: finding.reason.value,
            }
            if semconv.GEN_AI_TOOL_NAME in attributes:
                padding_attributes[semconv.GEN_AI_TOOL_NAME] = attributes[semconv.GEN_AI_TOOL_NAME]
            self._instruments.padding.add(1, padding_attributes)

    def _record_budget(self, budget: BudgetSnapshot, side: str, server: str) -> None:
        self._instruments.budget_utilization.record(
            budget.utilization, {semconv.SIDE: side, semconv.SERVER_NAME: server}
        )
        if budget.crossed is not None:
            self._instruments.budget_crossings.add(
                1, {semconv.SIDE: side, semconv.BUDGET_LEVEL: budget.crossed.value}
            )

    # --- spans --------------------------------------------------------------------------
    def annotate_span(self, span: Span, outcome: Outcome) -> None:
        if not span.is_recording():
            return
        attributes: dict[str, AttributeValue] = {}
        analysed = [a for a in (outcome.request, outcome.response) if a is not None]
        if outcome.request is not None:
            attributes[semconv.TOKENS_REQUEST] = outcome.request.tokens
            self._capture(
                span, semconv.GEN_AI_TOOL_CALL_ARGUMENTS, outcome.exchange, outcome.exchange.request
            )
        if outcome.response is not None:
            response = outcome.response
            attributes[semconv.TOKENS_RESPONSE] = response.tokens
            attributes[semconv.TOKENS_OVERHEAD] = response.overhead_tokens
            attributes[semconv.TOKENS_OVERHEAD_RATIO] = round(response.overhead_ratio, 4)
            attributes[semconv.TOKENS_RISK] = response.risk.value
            self._capture(span, semconv.GEN_AI_TOOL_CALL_RESULT, outcome.exchange, outcome.exchange.response)
        if analysed:
            attributes[semconv.TOKENS_ENCODING] = analysed[-1].encoding
            attributes[semconv.TOKENS_EXACT] = all(a.exact for a in analysed)
        if outcome.budget is not None:
            attributes[semconv.BUDGET_SCOPE] = clean_text(outcome.budget.scope)
            attributes[semconv.BUDGET_USED] = outcome.budget.used
            attributes[semconv.BUDGET_UTILIZATION] = round(outcome.budget.utilization, 6)
            attributes[semconv.BUDGET_LEVEL] = outcome.budget.level.value
        span.set_attributes(attributes)
        for analysis in analysed:
            for finding in analysis.padding:
                span.add_event(
                    semconv.PADDING_EVENT,
                    {
                        semconv.PADDING_REASON: finding.reason.value,
                        semconv.PADDING_OFFSET: finding.offset,
                        semconv.PADDING_SCORE: round(finding.score, 4),
                        semconv.PADDING_BLOCK: finding.block,
                    },
                )

    def _capture(self, span: Span, key: str, exchange: Exchange, payload: object) -> None:
        """Opt-in content capture (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT), truncated."""
        if not self._capture_content or payload is None or exchange.method != "tools/call":
            return
        try:
            text = compact_json(payload)
        except (ValueError, TypeError, RecursionError):
            return
        span.set_attribute(key, text[: self._content_max_chars])
