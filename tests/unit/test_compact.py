# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Compact JSON in bounded steps (engine/compact.py) and the queue's payload weight (blocks.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import blocks, compact
from opentelemetry.instrumentation.mcp_tokens.engine.compact import STEP_CHARS, compact_json


def reference(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def records(count: int) -> list[dict[str, object]]:
    return [
        {"id": f"ord-{i}", "amount": i * 1.25, "paid": i % 2 == 0, "note": None, "tags": ["a", "b\u00e9"]}
        for i in range(count)
    ]


LARGE_VALUES = {
    "list of records": records(20_000),
    "dict of records": {f"key-{i}": row for i, row in enumerate(records(5_000))},
    "long string": 'a"b\\c\n\u2028😀é' * 50_000,
    "string in a record": {"rows": records(10), "blob": "x" * (3 * STEP_CHARS + 7)},
    "nested large lists": [[records(300)] for _ in range(10)],
    "non-string keys deep inside": [{1: "one", None: [2], 2.5: True}] * 5_000,
    "tuples and other types": [(1, 2), {"when": object.__name__}] * 5_000,
    "special floats": [float("nan"), float("inf"), -0.0, 1e300] * 5_000,
    "empty containers": [[], {}, "", [[]], {"a": {}}] * 5_000,
}


@pytest.mark.parametrize("name", LARGE_VALUES)
def test_large_values_encode_exactly_as_json_dumps(name: str) -> None:
    value = LARGE_VALUES[name]
    assert compact_json(value) == reference(value)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.text(min_size=1).map(lambda text: text * 3000),  # past a step
    lambda children: st.lists(children, max_size=40) | st.dictionaries(st.text(), children, max_size=40),
    max_leaves=60,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_json_value_encodes_exactly_as_json_dumps(value: object) -> None:
    assert compact_json(value) == reference(value)


def test_each_step_hands_the_c_encoder_a_bounded_share(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs: list[int] = []
    real = compact._ENCODER

    class Recording:
        def encode(self, value: object) -> str:
            text = real.encode(value)
            outputs.append(len(text))
            return text

    monkeypatch.setattr(compact, "_ENCODER", Recording())
    value = {"rows": records(40_000), "text": "y" * 1_000_000}
    assert compact_json(value) == reference(value)
    # Estimates are rough (numbers, escapes), so allow some slack over one step.
    assert len(outputs) > 100
    assert max(outputs) <= 2 * STEP_CHARS


def test_cycles_and_overly_deep_values_fail_as_json_dumps_does() -> None:
    looped: list[object] = []
    looped.append(looped)
    with pytest.raises((ValueError, RecursionError)):
        compact_json(looped)
    assert blocks.tool_result_blocks({"structuredContent": looped}).__next__().text == ""


# --- payload_chars: the worker queue's memory weight, computed on the caller's path ------------


def test_weight_of_a_text_result_is_its_text() -> None:
    assert blocks.payload_chars({"content": [{"type": "text", "text": "x" * 12_345}]}) >= 12_345


@pytest.mark.parametrize(
    "payload",
    [
        {
            "content": [{"type": "text", "text": json.dumps(records(5_000))}],
            "structuredContent": {"r": records(5_000)},
        },
        {
            "tools": [
                {"name": f"t{i}", "description": "d" * 300, "inputSchema": {"type": "object"}}
                for i in range(2_000)
            ]
        },
        {"contents": [{"uri": f"file:///{i}", "text": "z" * 1_000} for i in range(3_000)]},
    ],
    ids=["structured", "listing", "resources"],
)
def test_weight_of_large_payloads_is_within_a_factor_of_their_size(payload: dict[str, object]) -> None:
    size = len(reference(payload))
    weight = blocks.payload_chars(payload)
    assert size / 3 <= weight <= 3 * size


class CountingMapping(Mapping[str, object]):
    """A mapping that counts how many of its values were read."""

    def __init__(self, size: int) -> None:
        self._size = size
        self.read = 0

    def __getitem__(self, key: str) -> object:
        self.read += 1
        return "v" * 10

    def __iter__(self) -> Iterator[str]:
        for index in range(self._size):
            self.read += 1
            yield str(index)

    def __len__(self) -> int:
        return self._size


def test_weight_reads_a_bounded_sample_of_a_huge_container() -> None:
    mapping = CountingMapping(1_000_000)
    weight = blocks.payload_chars({"result": mapping})
    assert mapping.read <= 2 * blocks._WEIGHT_SAMPLE
    assert weight == 10_000_000  # ten characters a value, scaled to every value


class ChainMapping(Mapping[str, object]):
    """A mapping whose one value is the next link: a chain `depth` links long, counting reads."""

    reads = 0

    def __init__(self, depth: int) -> None:
        self._depth = depth

    def __getitem__(self, key: str) -> object:
        ChainMapping.reads += 1
        return ChainMapping(self._depth - 1) if self._depth else "leaf"

    def __iter__(self) -> Iterator[str]:
        yield "next"

    def __len__(self) -> int:
        return 1


def test_weight_expands_a_bounded_number_of_containers_however_deep_the_payload() -> None:
    ChainMapping.reads = 0
    blocks.payload_chars({"result": ChainMapping(100_000)})
    assert ChainMapping.reads <= blocks._WEIGHT_NODE_BUDGET
