# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard's counting, cutting and bookkeeping, checked against tiktoken directly."""

from __future__ import annotations

import base64
import json
import math
import struct
import zlib
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec, load_bundled_encoding
from opentelemetry.instrumentation.mcp_tokens.guard.accountant import Accountant
from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard, GuardCall
from opentelemetry.instrumentation.mcp_tokens.guard.memory import Deliveries, Repeats
from opentelemetry.instrumentation.mcp_tokens.guard.policy import Policy, render
from opentelemetry.instrumentation.mcp_tokens.guard.results import Results
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import GuardTokenizer, Measure
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from tests.metric_points import points_of

ENCODING = load_bundled_encoding("o200k_base")

TEXTS = {
    "prose": "The context window is a budget, and every result spends part of it. " * 400,
    "json": json.dumps([{"id": i, "name": f"item-{i}", "tags": ["a", "b"]} for i in range(800)]),
    "cjk": "上下文窗口是一种预算，每个结果都会消耗其中的一部分。日本語のテキストも混ざる。" * 300,
    "emoji": "🙂👍🏽 naïve café — ok " * 600,
    "no_cut": "a" * 60_000,
    "code": "def f(x):\n    return [i * x for i in range(10)]\n\n" * 500,
}


def tokens(text: str) -> int:
    return len(ENCODING.encode_ordinary(text))


@pytest.fixture(scope="module")
def measure() -> Measure:
    return GuardTokenizer(TokenizerSpec("o200k_base"), max_bytes=32 << 20, wait_s=30.0).measure()


@pytest.fixture(scope="module")
def results(measure: Measure) -> Results:
    return Results(lambda: measure, ImageModel.ANTHROPIC)


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_count_upto_is_exact_or_says_over(measure: Measure, kind: str) -> None:
    text = TEXTS[kind]
    exact = tokens(text)
    for budget in (1, exact // 3, exact - 1, exact, exact + 1, 10 * exact):
        counted = measure.count_upto(text, budget)
        assert counted == (exact if exact <= budget else None), budget


@pytest.mark.parametrize("kind", sorted(TEXTS))
@pytest.mark.parametrize("budget", [1, 7, 500, 2500])
def test_prefix_fits_and_is_whole_characters(measure: Measure, kind: str, budget: int) -> None:
    text = TEXTS[kind]
    chars, counted = measure.prefix(text, budget)
    prefix = text[:chars]
    assert counted == tokens(prefix) <= budget
    prefix.encode("utf-8")  # whole characters: never half a UTF-8 sequence (or a lone surrogate)
    # A token boundary close to the budget, not a timid cut.
    assert counted >= budget - 4 or chars == len(text)


def png(width: int, height: int) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    raw = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0"))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(raw).decode()


def image_tokens(width: int, height: int) -> int:
    return math.ceil(width * height / 750)  # Anthropic's rule below its resize caps


def independent_tokens(result: dict[str, Any]) -> int:
    total = 0
    for block in result.get("content", []):
        if block["type"] == "image":
            raw = base64.b64decode(block["data"])
            total += image_tokens(*struct.unpack(">II", raw[16:24]))
        elif block["type"] == "resource":
            total += tokens(block["resource"]["text"])
        else:
            total += tokens(block["text"])
    for entry in result.get("contents", []):
        total += tokens(entry["text"])
    if result.get("structuredContent") is not None:
        total += tokens(json.dumps(result["structuredContent"], separators=(",", ":"), ensure_ascii=False))
    return total


def notice(delivered: int) -> str:
    return f"[cut: {delivered:,} tokens delivered]"


def test_small_result_passes_without_counting(results: Results) -> None:
    result = {"content": [{"type": "text", "text": "x" * 999}]}
    assessment = results.assess("tools/call", result, 1000)
    assert assessment.fits and assessment.tokens is None  # decided from its size alone


def test_truncate_keeps_a_prefix_and_notes_media(results: Results) -> None:
    image = png(1000, 1000)  # 1334 tokens
    result = {
        "content": [
            {"type": "text", "text": TEXTS["prose"][:400]},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "text", "text": TEXTS["json"]},
        ],
        "_meta": {"kept": True},
    }
    limit = 600
    assessment = results.assess("tools/call", result, limit)
    assert not assessment.fits
    shaped = results.truncate(assessment, limit, notice)
    delivered = shaped.result
    assert shaped.delivered == independent_tokens(delivered) <= limit
    first, note, last = delivered["content"]
    assert first is result["content"][0]  # kept whole, shared
    assert note["type"] == "text" and note["text"].startswith("[image left out by mcp-tokens")
    assert last["text"] == f"[cut: {shaped.delivered:,} tokens delivered]"
    assert delivered["_meta"] == {"kept": True}
    assert result["content"][2]["text"] == TEXTS["json"]  # the original is untouched


def test_truncate_cuts_the_first_text_that_does_not_fit(results: Results) -> None:
    result = {
        "content": [
            {"type": "text", "text": "head"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": TEXTS["code"]}},
            {"type": "text", "text": "dropped whole"},
        ]
    }
    shaped = results.truncate(results.assess("tools/call", result, 300), 300, notice)
    head, cut, _notice = shaped.result["content"]
    assert head["text"] == "head"
    assert TEXTS["code"].startswith(cut["resource"]["text"]) and cut["resource"]["uri"] == "file:///a"
    assert shaped.delivered == independent_tokens(shaped.result) <= 300


def test_resource_read_is_cut_with_a_notice_entry(results: Results) -> None:
    result = {"contents": [{"uri": "doc://big", "mimeType": "text/plain", "text": TEXTS["cjk"]}]}
    shaped = results.truncate(results.assess("resources/read", result, 400), 400, notice)
    cut, note = shaped.result["contents"]
    assert TEXTS["cjk"].startswith(cut["text"])
    assert note["uri"] == "doc://big" and note["text"].startswith("[cut:")
    assert shaped.delivered == independent_tokens(shaped.result) <= 400


def test_reject_is_an_error_result_within_the_limit(results: Results) -> None:
    result = {"content": [{"type": "text", "text": TEXTS["json"]}], "structuredContent": {"a": 1}}
    shaped = results.replace(results.assess("tools/call", result, 50), 5, lambda n: "refused " * 20)
    assert shaped.result["isError"] is True and "structuredContent" not in shaped.result
    assert shaped.delivered == independent_tokens(shaped.result) <= 5


def test_twenty_megabytes_are_cut_to_the_limit(results: Results) -> None:
    text = TEXTS["json"] * (20_000_000 // len(TEXTS["json"]))
    result = {"content": [{"type": "text", "text": text}]}
    assessment = results.assess("tools/call", result, 25_000)
    shaped = results.truncate(assessment, 25_000, notice)
    assert shaped.delivered == independent_tokens(shaped.result) <= 25_000
    assert text.startswith(shaped.result["content"][0]["text"])
    original, exact = results.original_tokens(assessment)
    assert not exact and original == pytest.approx(tokens(text), rel=0.2)  # an estimate, stated so


def test_exact_original_off_the_response_path(results: Results) -> None:
    result = {"content": [{"type": "text", "text": TEXTS["prose"]}, {"type": "image", "data": png(200, 200)}]}
    assessment = results.assess("tools/call", result, 100)
    assert results.exact_tokens(assessment) == tokens(TEXTS["prose"]) + image_tokens(200, 200)


def test_notice_template() -> None:
    text = render(
        "{tool}: {original_tokens} -> {delivered_tokens} of {limit} {other}",
        tool="t",
        original="about 1,200",
        delivered=900,
        limit=1000,
    )
    assert text == "t: about 1,200 -> 900 of 1,000 {other}"


def test_policy_from_settings() -> None:
    settings = Settings.load(
        {},
        {
            "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD": "reject",
            "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_TOOL_LIMITS": "git_diff=2000, unlimited=0",
            "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_MAX_RESULT_TOKENS": "-3",
            "OTEL_INSTRUMENTATION_MCP_TOKENS_GUARD_NOTICE": "{tool} was cut",
        },
    )
    policy = Policy.from_settings(settings)
    assert policy.mode == "reject" and policy.max_result_tokens == 25_000  # invalid: the default
    assert policy.limit_of("git_diff") == 2000
    assert policy.limit_of("unlimited") is None
    assert policy.limit_of("other") == 25_000
    assert policy.notice_template("reject", "result_limit") == "{tool} was cut"
    assert not Settings.load({}, {}).guard_enabled


def test_memory_is_bounded() -> None:
    clock = [0.0]
    deliveries = Deliveries(max_entries=3, idle_s=10.0, clock=lambda: clock[0])
    for scope in "abcd":
        deliveries.add(scope, 5)
    assert deliveries.used("a") == 0 and deliveries.used("d") == 5  # the oldest dropped
    clock[0] = 11.0
    assert deliveries.used("d") == 0  # idle
    repeats = Repeats(limit=2, window_s=60.0, max_entries=2, clock=lambda: clock[0])
    assert [repeats.record("s", "t", "{}") for _ in range(4)] == [1, 2, 3, 3]
    clock[0] = 100.0
    assert repeats.record("s", "t", "{}") == 1
    assert repeats.record("s", "t", '{"x":1}') == 1


def test_results_that_fit_by_size_never_wait_for_the_tokenizer() -> None:
    settings = Settings.load({"guard": "truncate", "guard_max_result_tokens": 1000}, {})
    # Not started, and waited for 0 s: not ready when the results arrive.
    tokenizer = GuardTokenizer(TokenizerSpec("o200k_base"), max_bytes=32 << 20, wait_s=0.0)
    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("test")
    accountant = Accountant(GuardInstruments(meter), ServerLabels(), lambda assessment: 0)
    guard = Guard(settings, Policy.from_settings(settings), tokenizer, accountant)
    call = GuardCall(side="server", method="tools/call", tool="t")
    small = {"content": [{"type": "text", "text": "fits by its size"}]}
    large = {"content": [{"type": "text", "text": TEXTS["prose"]}]}
    assert guard.check(call, small) is small
    assert points_of(reader, "mcp_tokens.guard.failures") == []
    assert guard.check(call, large) is large  # fails open: delivered unchanged, counted
    ((attributes, point),) = points_of(reader, "mcp_tokens.guard.failures")
    assert attributes["mcp_tokens.guard.failure"] == "no_exact_tokenizer" and point.value == 1
