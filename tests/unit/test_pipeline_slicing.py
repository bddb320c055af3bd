"""Which analyses run with the worker's pauses inside them (`sliced`), and which do not.

The pauses come from a profile hook of the worker thread, which makes the interpreter
run slower; a light exchange holds the GIL for well under 1 ms in all and is analysed
without it, a heavy one (by characters, or by values for a listing of tiny tools) with it.
"""

from __future__ import annotations

import sys

import pytest
from opentelemetry.instrumentation.mcp_tokens import pipeline as pipeline_module
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import Analysis, Analyzer, PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import payload_weight
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline
from opentelemetry.instrumentation.mcp_tokens.worker import _pause_hook
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader


def _text(chars: int) -> dict[str, object]:
    return {"content": [{"type": "text", "text": "w" * chars}]}


def _blocks(count: int) -> dict[str, object]:
    return {"content": [{"type": "text", "text": str(index % 10)} for index in range(count)]}


def _tools(count: int) -> dict[str, object]:
    return {"tools": [{"name": f"t{index}", "inputSchema": {"type": "object"}} for index in range(count)]}


@pytest.mark.parametrize(
    ("method", "response", "hooked"),
    [
        ("tools/call", _text(1_000), False),
        ("tools/call", _text(pipeline_module.SLICE_FROM_CHARS), True),
        ("tools/call", _blocks(3), False),
        ("tools/call", _blocks(pipeline_module.SLICE_FROM_NODES), True),
        ("tools/list", _tools(2), False),
        ("tools/list", _tools(2_000), True),
    ],
    ids=["1k-text", "long-text", "few-blocks", "many-blocks", "small-listing", "listing-of-tiny-tools"],
)
def test_heavy_exchanges_are_analysed_sliced_and_light_ones_are_not(
    method: str, response: dict[str, object], hooked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    analyze = Analyzer.analyze

    def watching(self: Analyzer, kind: PayloadKind, payload: object) -> Analysis:
        seen.append(sys.getprofile())
        return analyze(self, kind, payload)

    monkeypatch.setattr(Analyzer, "analyze", watching)
    pipeline = Pipeline(Settings(), MeterProvider(metric_readers=[InMemoryMetricReader()]).get_meter("t"))
    pipeline.loader.start()
    assert pipeline.loader.wait(60)
    exchange = Exchange(Side.CLIENT, method, target="t" if method == "tools/call" else None)
    exchange.request = {"name": "t", "arguments": {}} if method == "tools/call" else {}
    exchange.finish(response)
    pipeline._process(exchange)
    assert seen, "the exchange was not analysed"
    assert all((hook is _pause_hook) is hooked for hook in seen)
    assert sys.getprofile() is None


@pytest.mark.parametrize("count", [20, 3_000, 50_000])
def test_weight_counts_the_values_of_a_payload_within_a_factor(count: int) -> None:
    # Each block is a mapping and two strings: three values, plus the list and the root.
    nodes = payload_weight(_blocks(count)).nodes
    assert 3 * count / 2 <= nodes <= 3 * count * 2


def test_weight_of_a_listing_counts_every_tool_it_did_not_visit() -> None:
    # A tool is a mapping, its name, its schema mapping and the schema's type string.
    assert payload_weight(_tools(20_000)).nodes >= 4 * 20_000 / 2
