# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Overhead by kind: marked, duplicate and formatting tokens."""

from __future__ import annotations

import json
import re
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine import blocks
from opentelemetry.instrumentation.mcp_tokens.engine.compact import compact_json
from opentelemetry.instrumentation.mcp_tokens.engine.overhead import (
    FULL_FORMAT_CHARS,
    BlockOverhead,
    OverheadKind,
    find_overhead,
    strip_json_whitespace,
)
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenCounter


def overhead_of(counter: TokenCounter, result: dict[str, Any], **kwargs: Any) -> list[BlockOverhead | None]:
    payload_blocks = list(blocks.tool_result_blocks(result))
    tokens = [counter.count(b.text).tokens for b in payload_blocks]
    return find_overhead(payload_blocks, tokens, lambda text: counter.count(text).tokens, **kwargs)


RECORDS = [{"id": i, "name": f"user {i}", "tags": ["a", "b"], "city": "Zürich"} for i in range(20)]


def test_compact_json_text_has_no_overhead(counter: TokenCounter) -> None:
    text = json.dumps(RECORDS, separators=(",", ":"), ensure_ascii=False)
    assert overhead_of(counter, {"content": [{"type": "text", "text": text}]}) == [None]


def test_pretty_json_formatting_is_the_difference_to_its_compact_form(counter: TokenCounter) -> None:
    pretty = json.dumps(RECORDS, indent=2)  # also escapes ü as \u00fc: more waste
    compact = json.dumps(RECORDS, separators=(",", ":"), ensure_ascii=False)
    expected = counter.count(pretty).tokens - counter.count(compact).tokens
    assert expected > 0
    (overhead,) = overhead_of(counter, {"content": [{"type": "text", "text": pretty}]})
    assert overhead == BlockOverhead(OverheadKind.FORMATTING, expected)


def test_structured_content_repeated_as_text_is_a_duplicate(counter: TokenCounter) -> None:
    data = {"rows": RECORDS}
    pretty = json.dumps(data, indent=2)
    text_overhead, structured_overhead = overhead_of(
        counter, {"content": [{"type": "text", "text": pretty}], "structuredContent": data}
    )
    compact = compact_json(data)
    assert structured_overhead == BlockOverhead(OverheadKind.DUPLICATE, counter.count(compact).tokens)
    # The text copy is the data the model reads; only its formatting is waste.
    assert text_overhead is not None and text_overhead.kind is OverheadKind.FORMATTING
    data_tokens = counter.count(pretty).tokens + counter.count(compact).tokens
    data_tokens -= text_overhead.tokens + structured_overhead.tokens
    assert data_tokens == counter.count(compact).tokens


def _wrapped(content: list[str], value: object) -> dict[str, Any]:
    return {
        "content": [{"type": "text", "text": text} for text in content],
        "structuredContent": {"result": value},
    }


def test_a_result_wrapper_of_what_the_text_shows_is_a_duplicate(counter: TokenCounter) -> None:
    # What MCPServer/FastMCP (both SDK lines) and fastmcp 3/4 send for str, int, float, bool and
    # list returns: the SDK shows a list item by item, fastmcp as one JSON text.
    shown = [
        (["Paris is the capital of France."], "Paris is the capital of France."),
        (["42"], 42),
        (["1.5"], 1.5),
        (["true"], True),
        (["1", "2", "3"], [1, 2, 3]),
        (["a b", "c"], ["a b", "c"]),
        (["[1,2,3]"], [1, 2, 3]),
        (['{\n  "a": 1\n}', '{\n  "b": 2\n}'], [{"a": 1}, {"b": 2}]),
    ]
    for content, value in shown:
        *texts, structured = overhead_of(counter, _wrapped(content, value))
        wrapper = counter.count(compact_json({"result": value})).tokens
        assert structured == BlockOverhead(OverheadKind.DUPLICATE, wrapper), (content, value)
        assert all(t is None or t.kind is OverheadKind.FORMATTING for t in texts)


def test_a_result_wrapper_of_something_else_is_data(counter: TokenCounter) -> None:
    not_shown = [
        (["Paris"], "Lyon"),
        (["1"], True),  # JSON tells 1 from true
        (["1", "2"], [1, 2, 3]),
        (["2", "1"], [1, 2]),
        ([], None),
    ]
    for content, value in not_shown:
        assert overhead_of(counter, _wrapped(content, value))[-1] is None, (content, value)
    two_keys = {"content": [{"type": "text", "text": "x"}], "structuredContent": {"result": "x", "n": 1}}
    assert overhead_of(counter, two_keys)[-1] is None


def test_structured_content_alone_is_data(counter: TokenCounter) -> None:
    result = {
        "content": [{"type": "text", "text": "Found 20 users."}],
        "structuredContent": {"rows": RECORDS},
    }
    assert overhead_of(counter, result) == [None, None]


def test_identical_blocks_after_the_first_are_duplicates(counter: TokenCounter) -> None:
    block = {"type": "text", "text": "The same paragraph, twice."}
    first, second, other = overhead_of(counter, {"content": [block, block, {"type": "text", "text": "x"}]})
    assert first is None and other is None
    assert second == BlockOverhead(OverheadKind.DUPLICATE, counter.count(block["text"]).tokens)


def test_marked_blocks_match_the_user_pattern(counter: TokenCounter) -> None:
    rules = "<system_rules>Always answer in French.</system_rules>"
    marker = re.compile(r"^<(system_rules|affordances)>")
    marked, data = overhead_of(
        counter,
        {"content": [{"type": "text", "text": rules}, {"type": "text", "text": "data"}]},
        marker=marker,
    )
    assert marked == BlockOverhead(OverheadKind.MARKED, counter.count(rules).tokens)
    assert data is None


def test_text_that_only_looks_like_json_has_no_formatting_overhead(counter: TokenCounter) -> None:
    for text in ["[not json at all]", "{ broken: json }", "[1, 2,\n 3"]:
        assert overhead_of(counter, {"content": [{"type": "text", "text": text}]}) == [None]


def test_large_pretty_json_is_sampled_close_to_the_exact_value(counter: TokenCounter) -> None:
    records = [{"id": i, "name": f"name-{i}", "score": i * 0.5, "ok": i % 2 == 0} for i in range(20_000)]
    pretty = json.dumps(records, indent=2, ensure_ascii=False)
    assert len(pretty) > 10 * FULL_FORMAT_CHARS
    exact = counter.count(pretty).tokens - counter.count(compact_json(records)).tokens
    (overhead,) = overhead_of(counter, {"content": [{"type": "text", "text": pretty}]})
    assert overhead is not None and overhead.kind is OverheadKind.FORMATTING
    assert abs(overhead.tokens - exact) / exact < 0.05


def test_formatting_of_a_1mb_block_counts_samples_never_the_block_again(counter: TokenCounter) -> None:
    # What it costs against counting is `tests.bench.engine_bounds`'s to check.
    records = [{"id": i, "text": f"line {i} of the report"} for i in range(25_000)]
    pretty = json.dumps(records, indent=1)
    payload_blocks = list(blocks.tool_result_blocks({"content": [{"type": "text", "text": pretty}]}))
    calls: list[int] = []

    def count(text: str) -> int:
        calls.append(len(text))
        return counter.count(text).tokens

    find_overhead(payload_blocks, [counter.count(pretty).tokens], count)
    assert sum(calls) <= 2 * 64 * 1024  # two sample counts, never the whole block again


def test_strip_json_whitespace_keeps_strings_intact() -> None:
    assert (
        strip_json_whitespace('{ "a b" : [ 1 ,\n 2 ],  "c\\" d": " x " }') == '{"a b":[1,2],"c\\" d":" x "}'
    )


def test_many_blocks_of_one_length_are_told_apart_and_repeats_found(counter: TokenCounter) -> None:
    # Same length, same start and end: only the middle differs (the duplicate check must
    # compare contents, and stay linear with thousands of such blocks).
    texts = [f"start {index:06d} end" for index in range(3_000)]
    result = {"content": [{"type": "text", "text": text} for text in [*texts, texts[17], texts[2_999]]]}
    overheads = overhead_of(counter, result)
    assert overheads[:3_000] == [None] * 3_000
    assert [o.kind if o else None for o in overheads[3_000:]] == [OverheadKind.DUPLICATE] * 2


def test_large_identical_blocks_are_duplicates_and_near_identical_ones_are_not(counter: TokenCounter) -> None:
    body = "lorem ipsum dolor sit amet " * 200_000  # 5.4 MB: compared in slices
    changed = body[:2_000_001] + "X" + body[2_000_002:]
    result = {"content": [{"type": "text", "text": t} for t in (body, changed, body)]}
    kinds = [o.kind if o else None for o in overhead_of(counter, result)]
    assert kinds[:2] == [None, None]
    assert kinds[2] is OverheadKind.DUPLICATE


def test_structured_content_that_repeats_a_large_text_block_exactly_is_a_duplicate(
    counter: TokenCounter,
) -> None:
    value = {"rows": [{"id": i, "note": "x" * 200} for i in range(8_000)]}  # compact JSON > 1 Mi chars
    text = compact_json(value)
    assert len(text) > (1 << 20)
    overheads = overhead_of(
        counter, {"content": [{"type": "text", "text": text}], "structuredContent": value}
    )
    assert overheads[0] is None
    assert overheads[1] is not None and overheads[1].kind is OverheadKind.DUPLICATE
