# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Structure overhead: the tokens a tabular encoding of arrays of uniform records would save."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens.engine import structure
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import Analyzer, PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import Block, BlockType
from opentelemetry.instrumentation.mcp_tokens.engine.overhead import OverheadKind
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenCounter

from tests.corpora import padding, structured
from tests.structure_expected import structure_tokens as expected_structure


@pytest.fixture(scope="module")
def analyzer(counter: TokenCounter) -> Analyzer:
    return Analyzer(counter)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _kinds(analyzer: Analyzer, result: dict[str, Any]) -> dict[str, int]:
    return {kind.value: tokens for kind, tokens in analyzer.analyze(PayloadKind.TOOL_RESULT, result).overhead}


def _text(value: object, indent: int | None = None) -> dict[str, Any]:
    text = json.dumps(value, indent=indent) if indent else _compact(value)
    return {"content": [{"type": "text", "text": text}]}


USERS = [
    {"id": i, "name": f"user {i}", "email": f"user{i}@example.com", "active": i % 3 != 0, "team": "core"}
    for i in range(12)
]


def test_uniform_records_cost_their_repeated_keys_measured_on_both_forms(
    analyzer: Analyzer, counter: TokenCounter
) -> None:
    count = counter.count
    table = [list(USERS[0]), *([user[key] for key in USERS[0]] for user in USERS)]
    saving = count(_compact(USERS)).tokens - count(_compact(table)).tokens
    assert saving > 0
    assert _kinds(analyzer, _text({"users": USERS, "page": 1})) == {"structure": saving}
    assert _kinds(analyzer, {"content": [], "structuredContent": {"users": USERS}}) == {"structure": saving}


def test_keys_in_another_order_are_the_same_table(analyzer: Analyzer, counter: TokenCounter) -> None:
    shuffled = [dict(reversed(list(user.items()))) if i % 2 else user for i, user in enumerate(USERS)]
    tokens = counter.count(_compact(shuffled)).tokens
    expected = expected_structure(shuffled, tokens, lambda t: counter.count(t).tokens)
    assert expected > 0
    assert _kinds(analyzer, _text(shuffled)) == {"structure": expected}


def test_formatting_and_structure_add_up_and_never_exceed_the_block(analyzer: Analyzer) -> None:
    pretty = analyzer.analyze(PayloadKind.TOOL_RESULT, _text(USERS, indent=2))
    compact = analyzer.analyze(PayloadKind.TOOL_RESULT, _text(USERS))
    kinds = dict(pretty.overhead)
    # Formatting is measured against the compact form, structure on the compact form: the
    # structure overhead of the pretty block is exactly that of its compact twin.
    assert kinds[OverheadKind.STRUCTURE] == dict(compact.overhead)[OverheadKind.STRUCTURE]
    assert kinds[OverheadKind.FORMATTING] == pretty.tokens - compact.tokens
    assert pretty.overhead_tokens < pretty.tokens


def test_a_duplicate_copy_is_not_charged_twice(analyzer: Analyzer) -> None:
    result = {"content": _text(USERS)["content"], "structuredContent": USERS}
    analysis = analyzer.analyze(PayloadKind.TOOL_RESULT, result)
    kinds = dict(analysis.overhead)
    assert kinds[OverheadKind.DUPLICATE] == analysis.blocks[1].tokens
    assert (
        kinds[OverheadKind.STRUCTURE]
        == dict(analyzer.analyze(PayloadKind.TOOL_RESULT, _text(USERS)).overhead)[OverheadKind.STRUCTURE]
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("three records", USERS[:3]),
        ("one key each", [{"id": i} for i in range(50)]),
        ("keys differ", [*USERS[:6], {"id": 99, "name": "x", "other": 1, "active": True, "team": "t"}]),
        ("scalars", list(range(500))),
        ("arrays of arrays", [[i, f"user {i}"] for i in range(50)]),
        ("one object", USERS[0]),
        (
            "long values: keys are under 5% of the block",
            [{"id": i, "text": " ".join(["lorem ipsum dolor sit amet"] * 40)} for i in range(10)],
        ),
        ("objects after a scalar", [1, *USERS]),
    ],
)
def test_shapes_that_are_not_tables_have_no_structure_overhead(
    analyzer: Analyzer, name: str, value: object
) -> None:
    assert "structure" not in _kinds(analyzer, _text(value)), name


def test_benign_corpus_finds_structure_only_in_arrays_of_records(
    analyzer: Analyzer, counter: TokenCounter
) -> None:
    """The padding corpus's benign texts (code, prose in many scripts, logs, CSV, SQL, base64,
    YAML, HTML): no structure overhead on anything but JSON arrays of uniform records."""
    found, tables = set(), set()
    for sample in padding.benign_samples():
        kinds = _kinds(analyzer, {"content": [{"type": "text", "text": sample.text}]})
        if "structure" in kinds:
            found.add(sample.name)
        if sample.text.lstrip()[:1] in "[{" and _has_table(sample.text, counter):
            tables.add(sample.name)
    assert found == tables
    assert {"json_records_compact_50k", "json_sparse_records"} <= found
    rng = random.Random(18)
    for count in (4, 20, 60):
        text = structured.json_records(rng, count)
        value = json.loads(text)
        tokens = counter.count(text).tokens
        expected = expected_structure(value, tokens, lambda t: counter.count(t).tokens)
        assert (
            0.05 * tokens
            <= expected
            == _kinds(analyzer, {"content": [{"type": "text", "text": text}]})["structure"]
        )


def _has_table(text: str, counter: TokenCounter) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return expected_structure(value, counter.count(text).tokens, lambda t: counter.count(t).tokens) > 0


class _Counting:
    """A token count that records how many characters it was asked to count."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self.chars = 0

    def __call__(self, text: str) -> int:
        self.chars += len(text)
        return self.counter.count(text).tokens


def _measure(block: Block, tokens: int, count: Callable[[str], int]) -> int:
    return structure.structure_tokens(block, tokens, tokens, count)


def test_huge_arrays_are_sampled_and_extrapolated(counter: TokenCounter) -> None:
    rng = random.Random(7)
    records = json.loads(structured.json_records(rng, 20_000))["data"]
    exact_saving = expected_structure(records, 1, lambda t: counter.count(t).tokens)
    tokens = counter.count(_compact(records)).tokens
    counting = _Counting(counter)
    estimate = _measure(Block(BlockType.STRUCTURED, text="", json_value=records), tokens, counting)
    assert abs(estimate - exact_saving) / exact_saving < 0.05
    # Two compact forms of a 64-record sample, not of 20,000 records.
    assert counting.chars < 2 * len(_compact(records[:64])) * 1.5


def test_large_text_blocks_are_not_parsed_whole(counter: TokenCounter) -> None:
    rng = random.Random(8)
    text = structured.json_records(rng, 3000)
    assert len(text) > structure.FULL_PARSE_CHARS
    tokens = counter.count(text).tokens
    exact_saving = expected_structure(json.loads(text), tokens, lambda t: counter.count(t).tokens)
    counting = _Counting(counter)
    estimate = _measure(Block(BlockType.TEXT, text=text), tokens, counting)
    assert abs(estimate - exact_saving) / exact_saving < 0.05
    assert counting.chars <= 2 * structure.FULL_PARSE_CHARS


@pytest.mark.parametrize(
    "text",
    [
        # One record of 2 MB: decoding stops at the sample window instead of parsing it whole.
        '[{"a": "' + "x" * (2 << 20) + '", "b": 1}, {"a": "y", "b": 2}]',
        # Truncated and malformed documents.
        '[{"a": 1, "b": 2}, {"a": 2, "b": ' + " " * (100 << 10) + "]",
        "[" + '{"a":1,"b":2},' * 30_000 + "}]",
        # Deep nesting.
        "[" * 50_000 + "]" * 50_000,
        '{"x": ' + "[" * 10_000 + '{"a":1,"b":2}' + "]" * 10_000 + "}" + " " * (70 << 10),
    ],
)
def test_hostile_large_texts_cost_a_bounded_count(counter: TokenCounter, text: str) -> None:
    counting = _Counting(counter)
    result = _measure(Block(BlockType.TEXT, text=text), 100_000, counting)
    assert result >= 0
    assert counting.chars <= 2 * structure.FULL_PARSE_CHARS


def test_wide_and_deep_values_visit_a_bounded_number_of_nodes(counter: TokenCounter) -> None:
    wide: dict[str, object] = {f"k{i}": [{"a": i, "b": i}] * 5 for i in range(100_000)}
    counting = _Counting(counter)
    structure.structure_tokens(Block(BlockType.STRUCTURED, json_value=wide), 10**6, 10**6, counting)
    assert len(structure.record_arrays(wide)) <= structure.MAX_ARRAYS
    deep: list[object] = []
    node = deep
    for _ in range(100_000):
        child: list[object] = []
        node.append(child)
        node = child
    assert structure.record_arrays(deep) == []


def test_records_too_deep_to_re_encode_leave_the_rest_of_the_analysis_alone(analyzer: Analyzer) -> None:
    deep: object = "leaf"
    for _ in range(5_000):
        deep = [deep]
    records = [{"id": i, "tree": deep} for i in range(4)]
    analysis = analyzer.analyze(
        PayloadKind.TOOL_RESULT, {"content": [], "structuredContent": {"rows": records}}
    )
    assert analysis.encoding != "estimate" and analysis.error is None
    assert "structure" not in {kind.value for kind, _ in analysis.overhead}
