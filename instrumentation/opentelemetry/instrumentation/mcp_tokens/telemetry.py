# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Creates the instruments once and records an analysed exchange onto its span and metrics.

Histograms are the SDK's synchronous instruments. Counters and the definition gauge are
kept here, as cumulative sums and last values per attribute set, and read by observable
instruments when a reader collects: recording a finding then costs a dictionary update
instead of an SDK measurement (about 10 microseconds each, on the worker's share of the
GIL), and the exported series are the same (monotonic cumulative sums, gauges).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .engine.risk import RiskThresholds
from .exchange import Exchange, Side
from .labels import clean_text

if TYPE_CHECKING:  # the analysis is imported at the first exchange (worker.open_link)
    from .analyst import Findings
    from .engine.analysis import Analysis
    from .engine.ledger import BudgetSnapshot

# The encoding label of estimated payloads, as the content-aware estimate names itself.
ESTIMATE_ENCODING = "estimate"


class Estimate(NamedTuple):
    """An exchange's tokens estimated from its payloads' length (None: no such payload)."""

    server: str
    target: str
    request: int | None
    response: int | None
    risk: RiskThresholds


_Key = tuple[tuple[str, AttributeValue], ...]


class _Series:
    """Values per attribute set, read by an observable instrument at collection."""

    def __init__(self) -> None:
        self._values: dict[_Key, float] = {}
        self._attributes: dict[_Key, dict[str, AttributeValue]] = {}
        self._lock = threading.Lock()

    def _key(self, attributes: Mapping[str, AttributeValue]) -> _Key:
        key = tuple(sorted(attributes.items()))
        if key not in self._attributes:
            with self._lock:
                self._attributes.setdefault(key, dict(attributes))
        return key

    def observe(self, options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            values = list(self._values.items())
        return [Observation(value, self._attributes[key]) for key, value in values]


class CumulativeSum(_Series):
    """A monotonic counter (`add`), exported through an ObservableCounter."""

    def __init__(self, meter: Meter, name: str, *, unit: str, description: str) -> None:
        super().__init__()
        meter.create_observable_counter(name, callbacks=[self.observe], unit=unit, description=description)

    def add(self, amount: float, attributes: Mapping[str, AttributeValue]) -> None:
        if amount < 0:
            return
        key = self._key(attributes)
        with self._lock:
            self._values[key] = self._values.get(key, 0) + amount


class LastValue(_Series):
    """A gauge (`set`), exported through an ObservableGauge."""

    def __init__(self, meter: Meter, name: str, *, unit: str, description: str) -> None:
        super().__init__()
        meter.create_observable_gauge(name, callbacks=[self.observe], unit=unit, description=description)

    def set(self, value: float, attributes: Mapping[str, AttributeValue]) -> None:
        key = self._key(attributes)
        with self._lock:
            self._values[key] = value


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
        self.overhead = CumulativeSum(
            meter, semconv.OVERHEAD, unit="{token}", description="Tokens that carry no data, by kind."
        )
        self.responses = CumulativeSum(
            meter, semconv.RESPONSES, unit="{response}", description="Analysed responses, by risk tier."
        )
        self.tool_definition = LastValue(
            meter,
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
        self.budget_crossings = CumulativeSum(
            meter,
            semconv.BUDGET_CROSSINGS,
            unit="{scope}",
            description="Budget scopes that reached the warning or critical level.",
        )
        self.padding = CumulativeSum(
            meter,
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
        self.host_over_limit = CumulativeSum(
            meter,
            semconv.HOST_OVER_LIMIT,
            unit="{response}",
            description="Responses over a chosen host's result limit, counted in that host's unit.",
        )
        self.tools = LastValue(
            meter,
            semconv.TOOLS,
            unit="{tool}",
            description="Tools in each server's latest tools/list.",
        )
        self.analysis_skipped = CumulativeSum(
            meter,
            semconv.ANALYSIS_SKIPPED,
            unit="{payload}",
            description="Payloads mcp-tokens estimated or skipped instead of counting exactly, by reason.",
        )


def _no_pause() -> None:
    pass


class Recorder:
    """Writes outcomes onto spans and instruments. `pause` is called between the parts of
    an exchange's record (the worker hands the GIL to a waiting call there: the SDK's
    histograms cost about 15 microseconds a measurement, an exchange's record up to a few
    hundred in all)."""

    def __init__(self, instruments: Instruments, pause: Callable[[], None] = _no_pause) -> None:
        self._instruments = instruments
        self.pause = pause
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

    def record_findings(self, exchange: Exchange, findings: Findings, send_s: float = 0.0) -> None:
        """The token metrics of an analysed exchange (`send_s`: this process's share of the
        analysis' CPU time, encoding the payloads for the counting service)."""
        side = exchange.side.value
        base: dict[str, AttributeValue] = {
            semconv.SIDE: side,
            semconv.MCP_METHOD_NAME: exchange.method,
            semconv.SERVER_NAME: findings.server,
        }
        if findings.target:
            base[semconv.target_attribute(exchange.method)] = findings.target
        for direction, analysis in (
            (semconv.DIRECTION_REQUEST, findings.request),
            (semconv.DIRECTION_RESPONSE, findings.response),
        ):
            if analysis is not None:
                self._record_analysis(analysis, {**base, semconv.DIRECTION: direction})
                self.pause()
        if findings.definitions is not None:
            self._record_definitions(side, findings.server, findings.definitions)
        if findings.tool_count is not None:
            self._instruments.tools.set(
                findings.tool_count, {semconv.SIDE: side, semconv.SERVER_NAME: findings.server}
            )
        for host, limit in findings.host_limits:
            self._instruments.host_over_limit.add(1, {**base, semconv.HOST: host, semconv.HOST_LIMIT: limit})
        if findings.budget is not None:
            self._record_budget(findings.budget, side, findings.server)
        self._instruments.analysis_duration.record(
            findings.analysis_s + send_s, {semconv.SIDE: side, semconv.MCP_METHOD_NAME: exchange.method}
        )

    def record_estimate(self, exchange: Exchange, estimate: Estimate, reason: str) -> None:
        """The token metrics of an exchange that could not be counted: its estimated tokens,
        and one `analysis.skipped` per payload, with the reason."""
        base: dict[str, AttributeValue] = {
            semconv.SIDE: exchange.side.value,
            semconv.MCP_METHOD_NAME: exchange.method,
            semconv.SERVER_NAME: estimate.server,
            semconv.TOKENS_ENCODING: ESTIMATE_ENCODING,
        }
        if estimate.target:
            base[semconv.target_attribute(exchange.method)] = estimate.target
        for direction, tokens in (
            (semconv.DIRECTION_REQUEST, estimate.request),
            (semconv.DIRECTION_RESPONSE, estimate.response),
        ):
            if tokens is None:
                continue
            attributes = {**base, semconv.DIRECTION: direction}
            self._instruments.payload.record(tokens, attributes)
            if direction == semconv.DIRECTION_RESPONSE:
                risk = estimate.risk.classify(tokens).value
                self._instruments.responses.add(1, {**attributes, semconv.TOKENS_RISK: risk})
            self.record_skip(exchange, reason)

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
    def annotate_span_estimate(self, span: Span, estimate: Estimate, reason: str) -> None:
        if not span.is_recording():
            return
        attributes: dict[str, AttributeValue] = {
            semconv.TOKENS_ENCODING: ESTIMATE_ENCODING,
            semconv.TOKENS_EXACT: False,
            semconv.TOKENS_SKIPPED: reason,
        }
        if estimate.request is not None:
            attributes[semconv.TOKENS_REQUEST] = estimate.request
        if estimate.response is not None:
            attributes[semconv.TOKENS_RESPONSE] = estimate.response
            attributes[semconv.TOKENS_RISK] = estimate.risk.classify(estimate.response).value
        span.set_attributes(attributes)

    def annotate_span(self, span: Span, findings: Findings) -> None:
        if not span.is_recording():
            return
        attributes: dict[str, AttributeValue] = {}
        analysed = [a for a in (findings.request, findings.response) if a is not None]
        request_text, response_text = findings.content
        if findings.request is not None:
            attributes[semconv.TOKENS_REQUEST] = findings.request.tokens
            if request_text is not None:
                attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = request_text
        if findings.response is not None:
            response = findings.response
            attributes[semconv.TOKENS_RESPONSE] = response.tokens
            attributes[semconv.TOKENS_OVERHEAD] = response.overhead_tokens
            attributes[semconv.TOKENS_OVERHEAD_RATIO] = round(response.overhead_ratio, 4)
            attributes[semconv.TOKENS_RISK] = response.risk.value
            if response_text is not None:
                attributes[semconv.GEN_AI_TOOL_CALL_RESULT] = response_text
        if analysed:
            attributes[semconv.TOKENS_ENCODING] = analysed[-1].encoding
            attributes[semconv.TOKENS_EXACT] = all(a.exact for a in analysed)
        if findings.budget is not None:
            attributes[semconv.BUDGET_SCOPE] = clean_text(findings.budget.scope)
            attributes[semconv.BUDGET_USED] = findings.budget.used
            attributes[semconv.BUDGET_UTILIZATION] = round(findings.budget.utilization, 6)
            attributes[semconv.BUDGET_LEVEL] = findings.budget.level.value
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


class GuardInstruments:
    """The guard's counters (docs/telemetry.md, "The guard"): created only when a guard is on."""

    def __init__(self, meter: Meter) -> None:
        self.actions = CumulativeSum(
            meter,
            semconv.GUARD_ACTIONS,
            unit="{result}",
            description="Results the guard cut, refused or warned about, by action and reason.",
        )
        self.removed = CumulativeSum(
            meter,
            semconv.GUARD_REMOVED,
            unit="{token}",
            description="Tokens of guarded results that were not delivered.",
        )
        self.failures = CumulativeSum(
            meter,
            semconv.GUARD_FAILURES,
            unit="{result}",
            description="Results the guard delivered unchanged because it could not act (fail open).",
        )
