# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Static analysis of outputSchemas: worst cases computed by hand, bounds, causes, hostile schemas."""

from __future__ import annotations

import json
import math
import time
from typing import Annotated, Any

import pytest
from opentelemetry.exporter.mcp_tokens.cli.static import (
    FORMAT_LENGTHS,
    Assumptions,
    Bound,
    Cause,
    estimate_output,
    schema_stats,
)
from pydantic import BaseModel, Field


@pytest.fixture(scope="module")
def count(o200k):  # type: ignore[no-untyped-def]
    def count_tokens(text: str) -> int:
        return len(o200k.encode_ordinary(text))

    return count_tokens


def key(count: Any, name: str) -> int:
    """Tokens of `"name":`, as the walker charges every property."""
    return int(count(json.dumps(name) + ":"))


def estimate(schema: object, count: Any, **assumed: Any) -> Any:
    return estimate_output({"name": "t", "outputSchema": schema}, count, Assumptions(**assumed))


def test_bounded_array_of_objects_matches_hand_computation(count: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "maxItems": 20,
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 80}, "ok": {"type": "boolean"}},
                },
            }
        },
    }
    item = (
        2 + key(count, "name") + (80 + 1) + key(count, "ok") + count("false") + 1
    )  # braces, 2 entries, comma
    items = 2 + 20 * item + 19
    structured = 2 + key(count, "items") + items
    result = estimate(schema, count)
    assert result.bound is Bound.BOUNDED
    assert result.structured_tokens == structured
    assert result.worst_case_tokens == 2 * structured  # structuredContent and its text copy
    assert [(f.name, f.tokens, f.bounded, f.kind) for f in result.fields] == [
        ("items", key(count, "items") + items, True, "array")
    ]
    assert result.unbounded == ()
    assert estimate(schema, count, text_copy=False).worst_case_tokens == structured


def test_strings_by_max_length_format_and_chars_per_token(count: Any) -> None:
    def only(field_schema: dict[str, Any], **assumed: Any) -> int:
        result = estimate({"type": "object", "properties": {"v": field_schema}}, count, **assumed)
        return int(result.fields[0].tokens - key(count, "v"))

    assert only({"type": "string", "maxLength": 64}) == 64 + 1
    assert only({"type": "string", "format": "uuid"}) == FORMAT_LENGTHS["uuid"] + 1
    assert only({"type": "string", "maxLength": 64}, chars_per_token=4.0) == 16 + 1
    assert only({"type": "string", "maxLength": 10}, chars_per_token=3.0) == math.ceil(10 / 3) + 1
    assert only({"type": "string"}, unbounded_string_chars=300) == 300 + 1


def test_numbers_enums_and_constants_are_counted_exactly(count: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "small": {"type": "integer", "minimum": 0, "maximum": 99},
            "id": {"type": "integer", "minimum": 1, "maximum": 99_999_999},
            "any_int": {"type": "integer"},
            "price": {"type": "number"},
            "status": {"enum": ["open", "shipped", "a considerably longer status value"]},
            "kind": {"const": "order"},
            "none": {"type": "null"},
        },
    }
    fields = {f.name: f.tokens - key(count, f.name) for f in estimate(schema, count).fields}
    assert fields == {
        "small": max(count("0"), count("99")),
        "id": max(count("1"), count("99999999")),
        "any_int": count(str(-(2**53 - 1))),
        "price": count("-1.7976931348623157e+308"),
        "status": count('"a considerably longer status value"'),
        "kind": count('"order"'),
        "none": count("null"),
    }


def test_unbounded_parts_are_named_with_their_cause(count: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "integer", "maximum": 9, "minimum": 0}},
            "notes": {"type": "string"},
            "meta": {"type": "object", "additionalProperties": {"type": "boolean"}},
            "blob": {},
        },
    }
    result = estimate(schema, count, unbounded_items=10, unbounded_string_chars=50)
    assert result.bound is Bound.UNBOUNDED
    assert [(p.path, p.cause) for p in result.unbounded] == [
        ("$.rows", Cause.ARRAY),
        ("$.notes", Cause.STRING),
        ("$.meta", Cause.MAP),
        ("$.blob", Cause.ANY),
    ]
    assert result.paths(collection=True) == "$.rows, $.meta"
    assert result.paths(collection=False) == "$.notes, $.blob"
    rows = next(f for f in result.fields if f.name == "rows")
    assert rows.tokens == key(count, "rows") + 2 + 10 * count("9") + 9  # the assumed 10 items
    assert not rows.bounded


def test_maps_with_max_properties_and_bounded_keys_are_bounded(count: Any) -> None:
    schema = {
        "type": "object",
        "additionalProperties": {"type": "integer", "minimum": 0, "maximum": 100},
        "propertyNames": {"maxLength": 8},
        "maxProperties": 3,
    }
    result = estimate(schema, count)
    assert result.bound is Bound.BOUNDED
    entry = (8 + 2) + count("100") + 1
    assert result.structured_tokens == 2 + 3 * entry + 2  # braces, entries, commas between them


def test_bare_object_is_open_but_declared_properties_are_closed(count: Any) -> None:
    assert estimate({"type": "object"}, count).bound is Bound.UNBOUNDED
    closed = {"type": "object", "properties": {"a": {"type": "boolean"}}}
    assert estimate(closed, count).bound is Bound.BOUNDED
    explicit = {**closed, "additionalProperties": True}
    assert estimate(explicit, count).bound is Bound.UNBOUNDED


def test_refs_unions_all_of_and_type_lists(count: Any) -> None:
    schema = {
        "$defs": {"Name": {"type": "string", "maxLength": 30}},
        "type": "object",
        "properties": {
            "first": {"$ref": "#/$defs/Name"},
            "second": {"$ref": "#/$defs/Name"},
            "maybe": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]},
            "either": {"type": ["string", "null"], "maxLength": 12},
            "merged": {
                "allOf": [
                    {"type": "object", "properties": {"a": {"type": "boolean"}}},
                    {"properties": {"b": {"type": "boolean"}}},
                ]
            },
        },
    }
    fields = {f.name: (f.tokens - key(count, f.name), f.kind) for f in estimate(schema, count).fields}
    assert fields["first"] == fields["second"] == (31, "string")
    assert fields["maybe"] == (max(6, count("null")), "string")
    assert fields["either"] == (13, "string")
    merged = 2 + key(count, "a") + count("false") + key(count, "b") + count("false") + 1
    assert fields["merged"] == (merged, "object")


def test_one_of_siblings_apply_to_every_branch(count: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string", "maxLength": 4}},
        "oneOf": [{"required": ["a"]}, {"required": []}],
    }
    assert estimate(schema, count).bound is Bound.BOUNDED


def test_recursive_and_unresolvable_refs_are_unbounded(count: Any) -> None:
    tree = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "children": {"type": "array", "maxItems": 3, "items": {"$ref": "#/$defs/Node"}}
                },
            }
        },
        "$ref": "#/$defs/Node",
    }
    result = estimate(tree, count)
    assert result.bound is Bound.UNBOUNDED
    assert (result.unbounded[0].path, result.unbounded[0].cause) == ("$.children[]", Cause.RECURSIVE)
    dangling = estimate({"$ref": "#/$defs/Missing"}, count)
    assert [(p.path, p.cause) for p in dangling.unbounded] == [("$", Cause.UNRESOLVED)]


def test_tools_without_output_schema_are_unknown_not_guessed(count: Any) -> None:
    missing = estimate_output({"name": "t", "inputSchema": {"type": "object"}}, count, Assumptions())
    assert (missing.bound, missing.worst_case_tokens, missing.note) == (
        Bound.UNKNOWN,
        None,
        "no outputSchema",
    )
    junk = estimate_output({"name": "t", "outputSchema": "object"}, count, Assumptions())
    assert (junk.bound, junk.note) == (Bound.UNKNOWN, "outputSchema is not an object")


def test_pydantic_generated_schema(count: Any) -> None:
    """The schema pydantic (and so FastMCP) generates: $defs, titles, constrained types."""

    class Item(BaseModel):
        sku: Annotated[str, Field(max_length=36)]
        tags: Annotated[list[Annotated[str, Field(max_length=12)]], Field(max_length=5)]
        note: str | None = None

    class Page(BaseModel):
        items: Annotated[list[Item], Field(max_length=25)]
        total: int

    schema = Page.model_json_schema()
    result = estimate(schema, count)
    assert result.bound is Bound.UNBOUNDED
    assert [(p.path, p.cause) for p in result.unbounded] == [("$.items[].note", Cause.STRING)]
    assert result.stats.fields == 5  # items, total, sku, tags, note
    assert (result.stats.depth, result.stats.deepest_path) == (4, "$.items[].tags")  # Page, items, Item, tags


def test_stats_report_depth_fields_and_largest_enum(count: Any) -> None:
    countries = [f"c{index}" for index in range(40)]
    schema = {
        "type": "object",
        "properties": {
            "country": {"enum": countries},
            "deep": {"type": "object", "properties": {"list": {"type": "array", "items": {"enum": [1, 2]}}}},
        },
    }
    stats = schema_stats(schema, count)
    assert (stats.depth, stats.deepest_path, stats.fields) == (3, "$.deep.list", 3)
    assert (stats.largest_enum, stats.largest_enum_path) == (40, "$.country")
    assert stats.largest_enum_tokens == count(json.dumps(countries, separators=(",", ":")))


def test_hostile_schemas_are_bounded_in_time(count: Any) -> None:
    deep: dict[str, Any] = {"type": "string", "maxLength": 1}
    for _ in range(5_000):
        deep = {"anyOf": [deep]}
    chain = {
        f"D{i}": {
            "type": "object",
            "properties": {"a": {"$ref": f"#/$defs/D{i + 1}"}, "b": {"$ref": f"#/$defs/D{i + 1}"}},
        }
        for i in range(40)
    }
    chain["D40"] = {"type": "string", "maxLength": 3}
    huge_enum = {"enum": [f"value-{index}" for index in range(200_000)]}
    started = time.perf_counter()
    nested = estimate(deep, count)
    dag = estimate({"$defs": chain, "$ref": "#/$defs/D0"}, count)
    enum = estimate(huge_enum, count)
    assert time.perf_counter() - started < 5.0
    assert nested.bound is Bound.UNBOUNDED
    assert nested.unbounded[0].cause is Cause.TOO_COMPLEX
    assert dag.bound is Bound.BOUNDED  # 2**40 paths, each $ref walked once
    assert dag.structured_tokens == 10**9  # clamped at TOKEN_CEILING
    assert enum.bound is Bound.BOUNDED


def test_assumptions_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="chars per token"):
        Assumptions(chars_per_token=0)
    with pytest.raises(ValueError, match="unbounded items"):
        Assumptions(unbounded_items=-1)
