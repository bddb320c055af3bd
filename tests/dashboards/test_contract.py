# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Every metric and label the queries use is what the instrumentation really exports.

The instrumentation's own instruments record one data point each through the real
OpenTelemetry SDK and Prometheus exporter; the exposition is parsed back and every
selector in every dashboard, rule and alert must name a series family and labels that
exist there (recording-rule outputs and Prometheus' `up` aside).
"""

from __future__ import annotations

import re

import pytest
from opentelemetry.exporter.mcp_tokens.dashboards import all_expressions, names
from opentelemetry.exporter.mcp_tokens.dashboards.recording_rules import recording_rules
from opentelemetry.exporter.mcp_tokens.dashboards.settings import GeneratorSettings
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.guard.accountant import Accountant, Action
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments, Instruments
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_SELECTOR = re.compile(r"(?<![\w:.\"])([a-zA-Z_:][\w:]*)(\{[^}]*\})?")
_MATCHER = re.compile(r"(\w+)\s*(=~|!~|!=|=)")
_NOT_METRICS = {
    "by",
    "on",
    "sum",
    "max",
    "min",
    "rate",
    "increase",
    "offset",
    "unless",
    "or",
    "and",
    "group",
    "topk",
}

# Only the OTLP path into Prometheus produces this name (unit 1 gets _ratio there); the
# budget recording rule reads it as well as the exporter's name.
_OTLP_ONLY = {f"{names.BUDGET_UTILIZATION_OTLP}_bucket"}

_TOOL = {
    semconv.SIDE: "server",
    semconv.MCP_METHOD_NAME: "tools/call",
    semconv.SERVER_NAME: "crm",
    semconv.GEN_AI_TOOL_NAME: "search",
}


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Sample name -> label names, from the real exporter."""
    registry = CollectorRegistry()
    provider = MeterProvider(metric_readers=[PrometheusMetricReader(registry=registry)])
    instruments = Instruments(provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "0.1.0"))
    payload = {**_TOOL, semconv.DIRECTION: "response", semconv.TOKENS_ENCODING: "o200k_base"}
    duration = {semconv.MCP_METHOD_NAME: "tools/call", semconv.GEN_AI_TOOL_NAME: "search"}
    instruments.client_duration.record(0.5, duration)
    instruments.server_duration.record(0.5, duration)
    instruments.payload.record(9000, payload)
    instruments.overhead.add(10, {**payload, semconv.OVERHEAD_KIND: "formatting"})
    instruments.responses.add(1, {**payload, semconv.TOKENS_RISK: "critical"})
    instruments.tool_definition.set(
        500, {k: _TOOL[k] for k in (semconv.SIDE, semconv.SERVER_NAME, semconv.GEN_AI_TOOL_NAME)}
    )
    instruments.budget_utilization.record(0.8, {semconv.SIDE: "client", semconv.SERVER_NAME: "crm"})
    instruments.budget_crossings.add(1, {semconv.SIDE: "client", semconv.BUDGET_LEVEL: "warning"})
    instruments.padding.add(
        1,
        {
            semconv.SIDE: "server",
            semconv.MCP_METHOD_NAME: "tools/call",
            semconv.GEN_AI_TOOL_NAME: "search",
            semconv.PADDING_REASON: "invisible",
        },
    )
    instruments.analysis_duration.record(
        0.001, {semconv.SIDE: "server", semconv.MCP_METHOD_NAME: "tools/call"}
    )
    instruments.analysis_skipped.add(
        1, {semconv.SIDE: "server", semconv.MCP_METHOD_NAME: "tools/call", semconv.SKIP_REASON: "too_large"}
    )
    instruments.host_over_limit.add(1, {**payload, semconv.HOST: "claude-code", semconv.HOST_LIMIT: "tokens"})
    instruments.tools.set(130, {semconv.SIDE: "server", semconv.SERVER_NAME: "crm"})
    _guard_actions(provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "0.1.0"))
    text = generate_latest(registry).decode()
    provider.shutdown()
    samples: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    return samples


def _guard_actions(meter: Meter) -> None:
    """One guard action and one failure, recorded by the guard's own accountant."""
    labels = ServerLabels()
    labels.servers.admit("crm")
    labels.targets("crm").admit("search")
    accountant = Accountant(GuardInstruments(meter), labels, lambda assessment: 0, delay_s=0.0)
    accountant.record(
        Action(
            side="server",
            method="tools/call",
            server_name="crm",
            tool="search",
            action=semconv.GUARD_TRUNCATED,
            reason=semconv.GUARD_REASON_RESULT_LIMIT,
            delivered=25_000,
            original=40_000,
            assessment=None,
            span=None,
            at=0.0,
        )
    )
    accountant.stop()
    accountant.failure("server", "tools/call", semconv.GUARD_FAILURE_ERROR, None)


def test_every_selector_names_an_exported_series_and_labels(exported: dict[str, set[str]]) -> None:
    recorded = {r.record for r in recording_rules(GeneratorSettings())}
    checked = 0
    for expression in all_expressions():
        for name, matchers in _SELECTOR.findall(_GROUPING.sub(" ", expression.substituted())):
            if name in _NOT_METRICS or name in recorded or name in _OTLP_ONLY:
                continue
            if not (name.startswith("mcp") or name == "up"):
                continue
            checked += 1
            if name == "up":
                continue
            assert name in exported, f"{expression.source}: {name} is not exported"
            for label in _MATCHER.findall(matchers):
                assert label[0] in exported[name] | {"job", "instance"}, (
                    f"{expression.source}: {name} has no label {label[0]}"
                )
    assert checked > 80  # the walk really saw the selectors


def test_units_and_suffixes_are_the_exporters(exported: dict[str, set[str]]) -> None:
    assert "mcp_tokens_payload_bucket" in exported  # {token}: no unit suffix
    assert "mcp_client_operation_duration_seconds_bucket" in exported  # s -> _seconds
    assert "mcp_tokens_budget_utilization_bucket" in exported  # unit 1: no suffix, no _ratio
    assert "mcp_tokens_responses_total" in exported
    assert "mcp_tokens_tool_definition" in exported  # gauge: no suffix
