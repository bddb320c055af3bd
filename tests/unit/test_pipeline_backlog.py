"""When the worker falls behind, the pipeline estimates and says so; start-up is not falling behind."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens import worker as worker_module
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import SKIP_BACKLOG, Pipeline
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.metric_points import points_of

TEXT = "The quarterly report lists revenue by region and product line. " * 40


class Harness:
    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.pipeline = Pipeline(Settings(), MeterProvider(metric_readers=[self.reader]).get_meter("test"))
        self.spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracer = provider.get_tracer("test")

    def submit(self, ended_ago_s: float) -> None:
        exchange = Exchange(Side.SERVER, "tools/call", target="report")
        exchange.span = self.tracer.start_span("tools/call report")
        exchange.end_span = True
        exchange.finish({"content": [{"type": "text", "text": TEXT}]})
        exchange.end_ns -= int(ended_ago_s * 1e9)
        self.pipeline.submit(exchange)

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        return points_of(self.reader, name)


@pytest.fixture
def harness() -> Iterator[Harness]:
    harness = Harness()
    harness.pipeline.start()
    try:
        yield harness
    finally:
        harness.pipeline.shutdown()


def test_an_exchange_the_worker_is_far_behind_on_is_estimated_and_counted_as_backlog(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(worker_module, "MAX_BACKLOG_S", 0.3)
    assert harness.pipeline.loader.wait(60)
    time.sleep(0.4)  # so that an exchange can have ended 0.3 s ago, after the tokenizer loaded
    harness.submit(ended_ago_s=0.0)
    harness.submit(ended_ago_s=0.35)
    assert harness.pipeline.worker.drain(30)

    exact = len(load_bundled_encoding("o200k_base").encode_ordinary(TEXT))
    payload = {attrs[semconv.TOKENS_ENCODING]: point.sum for attrs, point in harness.points(semconv.PAYLOAD)}
    assert payload["o200k_base"] == exact
    # The content-aware estimate, within its documented error for prose.
    assert payload["estimate"] == pytest.approx(exact, rel=0.25)
    skipped = harness.points(semconv.ANALYSIS_SKIPPED)
    assert [(attrs[semconv.SKIP_REASON], point.value) for attrs, point in skipped] == [(SKIP_BACKLOG, 1)]
    spans = harness.spans.get_finished_spans()
    assert sorted(bool(span.attributes[semconv.TOKENS_EXACT]) for span in spans) == [False, True]


def test_exchanges_that_waited_for_the_tokenizer_to_load_are_counted_exactly(harness: Harness) -> None:
    # Queued before the tokenizer loaded and long ago: start-up, not a backlog.
    harness.submit(ended_ago_s=2 * worker_module.MAX_BACKLOG_S)
    assert harness.pipeline.worker.drain(60)
    loaded_ns = harness.pipeline.loader.loaded_ns
    assert 0 < loaded_ns <= time.time_ns()
    assert harness.points(semconv.ANALYSIS_SKIPPED) == []
    [(attrs, _)] = harness.points(semconv.PAYLOAD)
    assert attrs[semconv.TOKENS_ENCODING] == "o200k_base"
