# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The Analyzer end to end: exact totals, risk, overhead, padding, and hostile input."""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import (
    Analysis,
    Analyzer,
    AnalyzerOptions,
    PayloadKind,
)
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import BlockType
from opentelemetry.instrumentation.mcp_tokens.engine.compact import compact_json
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel, image_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.overhead import OverheadKind
from opentelemetry.instrumentation.mcp_tokens.engine.padding import PaddingReason
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenCounter


@pytest.fixture(scope="module")
def analyzer(counter: TokenCounter) -> Analyzer:
    return Analyzer(counter)


def png(width: int, height: int) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\x00" + b"\x80" * 3 * width for _ in range(height)))
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


def test_tool_result_total_is_the_sum_of_exact_block_counts(analyzer: Analyzer, o200k: Any) -> None:
    text = "The forecast for Zürich: 3 °C, light snow. 天气很冷。"
    structured = {"city": "Zürich", "celsius": 3}
    image = png(640, 480)
    result = {
        "content": [
            {"type": "text", "text": text},
            {"type": "image", "data": image, "mimeType": "image/png"},
        ],
        "structuredContent": structured,
    }
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    expected_text = len(o200k.encode_ordinary(text))
    expected_structured = len(o200k.encode_ordinary(compact_json(structured)))
    expected_image = image_tokens(640, 480, ImageModel.ANTHROPIC)
    assert [b.tokens for b in analysis.blocks] == [expected_text, expected_image, expected_structured]
    assert analysis.tokens == expected_text + expected_image + expected_structured
    assert analysis.exact and analysis.encoding == "o200k_base"
    assert analysis.blocks[1].media is not None and (
        analysis.blocks[1].media.width,
        analysis.blocks[1].media.height,
    ) == (640, 480)
    # The base64 itself would have cost far more than the image estimate.
    assert len(o200k.encode_ordinary(image)) > expected_image


def test_tool_listing_counts_each_definition(analyzer: Analyzer, o200k: Any) -> None:
    tools = [
        {"name": f"tool_{i}", "description": "Look things up. " * i, "inputSchema": {"type": "object"}}
        for i in range(1, 6)
    ]
    analysis = analyzer.analyze(PayloadKind.TOOL_LIST, {"tools": tools})
    expected = {t["name"]: len(o200k.encode_ordinary(compact_json(t))) for t in tools}
    assert dict(analysis.tool_definitions) == expected
    assert analysis.tokens == sum(expected.values())


@pytest.mark.parametrize(
    ("tokens_wanted", "tier"),
    [
        (1000, RiskTier.LOW),
        (1001, RiskTier.MEDIUM),
        (4000, RiskTier.MEDIUM),
        (4001, RiskTier.HIGH),
        (8000, RiskTier.HIGH),
        (8001, RiskTier.CRITICAL),
    ],
)
def test_risk_tier_follows_the_response_size(analyzer: Analyzer, tokens_wanted: int, tier: RiskTier) -> None:
    text = " hello" * tokens_wanted  # one token per word in o200k
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, {"content": [{"type": "text", "text": text}]})
    assert analysis.tokens == tokens_wanted
    assert analysis.risk is tier


def test_overhead_ratio_of_pretty_json_duplicated_as_structured_content(analyzer: Analyzer) -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(50)]
    result = {
        "content": [{"type": "text", "text": json.dumps(rows, indent=2)}],
        "structuredContent": {"rows": rows},
    }
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    kinds = dict(analysis.overhead)
    # {"rows": ...} is not the text's value; 50 records with the same keys are a table.
    assert set(kinds) == {OverheadKind.FORMATTING, OverheadKind.STRUCTURE}
    result["structuredContent"] = rows  # type: ignore[assignment]
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    kinds = dict(analysis.overhead)
    # The duplicate copy is all overhead already: structure is charged on the text block only.
    assert set(kinds) == {OverheadKind.FORMATTING, OverheadKind.DUPLICATE, OverheadKind.STRUCTURE}
    assert kinds[OverheadKind.DUPLICATE] == analysis.blocks[1].tokens
    assert 0.5 < analysis.overhead_ratio < 1.0
    assert analysis.overhead_tokens == sum(kinds.values())


def test_marked_blocks_use_the_configured_pattern(counter: TokenCounter) -> None:
    analyzer = Analyzer(counter, AnalyzerOptions(overhead_pattern=re.compile(r"^<rules>")))
    result = {
        "content": [{"type": "text", "text": "<rules>Be nice.</rules>"}, {"type": "text", "text": "data"}]
    }
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    assert dict(analysis.overhead) == {OverheadKind.MARKED: analysis.blocks[0].tokens}


def test_padding_findings_name_their_block(analyzer: Analyzer) -> None:
    padded = "Quarterly report. " + "\u200b" * 4000 + " End."
    result = {"content": [{"type": "text", "text": "clean"}, {"type": "text", "text": padded}]}
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    assert analysis.padding, "zero-width padding must be found"
    assert {f.block for f in analysis.padding} == {1}
    assert PaddingReason.INVISIBLE in {f.reason for f in analysis.padding}


def test_padding_detection_can_be_switched_off(counter: TokenCounter) -> None:
    analyzer = Analyzer(counter, AnalyzerOptions(detect_padding=False))
    analysis = analyzer.analyze(
        PayloadKind.TOOL_RESULT, {"content": [{"type": "text", "text": "\u200b" * 5000}]}
    )
    assert analysis.padding == ()


def test_resource_prompt_arguments_and_sampling(analyzer: Analyzer, o200k: Any) -> None:
    def count(text: str) -> int:
        return len(o200k.encode_ordinary(text))

    resource = analyzer.analyze(PayloadKind.RESOURCE, {"contents": [{"uri": "doc://a", "text": "body text"}]})
    assert resource.tokens == count("body text")
    prompt = analyzer.analyze(
        PayloadKind.PROMPT, {"messages": [{"role": "user", "content": {"type": "text", "text": "Review x"}}]}
    )
    assert prompt.tokens == count("Review x")
    arguments = analyzer.analyze(PayloadKind.TOOL_ARGUMENTS, {"name": "s", "arguments": {"q": "tokens"}})
    assert arguments.tokens == count('{"q":"tokens"}') and arguments.blocks[0].type is BlockType.ARGUMENTS
    sampling = analyzer.analyze(
        PayloadKind.SAMPLING_REQUEST,
        {
            "systemPrompt": "Be brief.",
            "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
        },
    )
    assert sampling.tokens == count("Be brief.") + count("2+2?")


def test_block_detail_is_bounded_but_totals_are_not(analyzer: Analyzer) -> None:
    content = [{"type": "text", "text": f"item {i}"} for i in range(3000)]
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, {"content": content})
    assert analysis.block_count == 3000 and len(analysis.blocks) == 1024
    assert analysis.tokens == sum(analyzer.counter.count(c["text"]).tokens for c in content)


def test_analyses_are_immutable(analyzer: Analyzer) -> None:
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, {"content": []})
    with pytest.raises(AttributeError):
        analysis.tokens = 5  # type: ignore[misc]
    assert analysis.tokens == 0 and analysis.overhead_ratio == 0.0 and analysis.risk is RiskTier.LOW


def nested(depth: int) -> object:
    value: object = "leaf"
    for level in range(depth):
        value = {"level": level, "child": [value]}
    return value


json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
json_like = st.recursive(
    json_leaves,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=40,
)
surrogates = st.text(
    alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=20
)
blocks_strategy = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, st.text() | surrogates),
        st.builds(lambda d: {"type": "image", "data": d, "mimeType": "image/png"}, st.text(max_size=50)),
        st.builds(
            lambda d: {"type": "audio", "data": d},
            st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
        ),
        st.builds(
            lambda b: {"type": "resource", "resource": {"uri": "x", "blob": b, "mimeType": "text/plain"}},
            st.binary(max_size=60).map(lambda b: base64.b64encode(b).decode()),
        ),
        json_like,
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks_strategy, json_like)
def test_no_payload_makes_the_engine_raise(analyzer: Analyzer, content: list[Any], structured: Any) -> None:
    for kind in PayloadKind:
        payload = {
            "content": content,
            "structuredContent": structured,
            "tools": content,
            "contents": content,
            "messages": [{"content": c} for c in content],
            "arguments": structured,
        }
        analysis = analyzer.analyze(kind, payload)
        assert isinstance(analysis, Analysis) and analysis.tokens >= 0
        assert 0.0 <= analysis.overhead_ratio <= 1.0


@pytest.mark.parametrize("depth", [50, 5000])
def test_deep_nesting_and_invalid_utf8_blobs(analyzer: Analyzer, depth: int) -> None:
    invalid_utf8 = base64.b64encode(b"\xff\xfe\xc3\x28 broken").decode()
    payload = {
        "content": [
            {"type": "resource", "resource": {"uri": "x", "blob": invalid_utf8, "mimeType": "text/plain"}}
        ],
        "structuredContent": nested(depth),
    }
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, payload)
    assert analysis.tokens > 0 and analysis.error is None


def test_a_payload_that_cannot_be_taken_apart_is_estimated(analyzer: Analyzer) -> None:
    class Hostile(dict):  # type: ignore[type-arg]
        def get(self, *args: Any) -> Any:
            raise RuntimeError("boom")

    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, Hostile(content=[]))
    assert analysis.error == "RuntimeError" and not analysis.exact and analysis.encoding == "estimate"
