# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What a payload shows a model: the block rules of docs/telemetry.md."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import blocks
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import BlockType


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_tool_result_counts_each_content_block_then_structured_content() -> None:
    result = {
        "content": [
            {"type": "text", "text": "héllo"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a"},
            {"type": "resource", "resource": {"uri": "doc://x", "text": "inner text"}},
        ],
        "structuredContent": {"city": "Zürich", "temp": 3},
        "isError": False,
        "_meta": {"not": "shown"},
    }
    got = list(blocks.tool_result_blocks(result))
    assert [b.type for b in got] == [
        BlockType.TEXT,
        BlockType.IMAGE,
        BlockType.AUDIO,
        BlockType.RESOURCE_LINK,
        BlockType.RESOURCE,
        BlockType.STRUCTURED,
    ]
    assert got[0].text == "héllo"
    assert got[1].data == "iVBORw0KGgo=" and got[1].text == ""
    assert got[3].text == compact(result["content"][3])  # type: ignore[index]
    assert got[4].text == "inner text"
    assert got[5].text == '{"city":"Zürich","temp":3}'
    assert got[5].json_value == {"city": "Zürich", "temp": 3}


def test_tool_definitions_keep_only_model_visible_fields_in_wire_order() -> None:
    tool = {
        "name": "search",
        "description": "Search docs",
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "_meta": {"internal": True},
        "icons": [{"src": "x.png"}],
        "annotations": {"readOnlyHint": True},
        "title": "Search",
    }
    (block,) = blocks.tool_list_blocks({"tools": [tool], "nextCursor": "abc"})
    assert block.type is BlockType.TOOL
    assert block.name == "search"
    assert block.text == compact(
        {
            "name": "search",
            "description": "Search docs",
            "inputSchema": tool["inputSchema"],
            "annotations": {"readOnlyHint": True},
            "title": "Search",
        }
    )


def test_tool_arguments_from_request_params_or_bare_arguments() -> None:
    (from_params,) = blocks.tool_arguments_blocks({"name": "echo", "arguments": {"text": "hi"}, "_meta": {}})
    assert (from_params.name, from_params.text) == ("echo", '{"text":"hi"}')
    (no_arguments,) = blocks.tool_arguments_blocks({"name": "ping"})
    assert no_arguments.text == "{}"
    (bare,) = blocks.tool_arguments_blocks({"q": "x"})
    assert bare.text == '{"q":"x"}'


def test_resource_blobs_are_read_by_mime_type() -> None:
    text_blob = base64.b64encode(b"plain words").decode()
    contents = [
        {"uri": "a", "mimeType": "text/plain", "text": "t"},
        {"uri": "b", "mimeType": "application/json", "blob": text_blob},
        {"uri": "c", "mimeType": "image/png", "blob": "iVBORw0KGgo="},
        {"uri": "d", "mimeType": "audio/mpeg", "blob": "SUQz"},
        {
            "uri": "e",
            "mimeType": "application/octet-stream",
            "blob": base64.b64encode(b"\xff\xfe\x00").decode(),
        },
    ]
    got = list(blocks.resource_blocks({"contents": contents}))
    assert [b.type for b in got] == [
        BlockType.RESOURCE,
        BlockType.RESOURCE,
        BlockType.IMAGE,
        BlockType.AUDIO,
        BlockType.RESOURCE,
    ]
    assert got[1].text == "plain words"
    # A binary blob that is not text is counted as the base64 a client would inline.
    assert got[4].text == contents[4]["blob"]


def test_prompt_and_sampling_messages() -> None:
    prompt = {
        "description": "not shown",
        "messages": [
            {"role": "user", "content": {"type": "text", "text": "Review this"}},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok"}, {"type": "text", "text": "more"}],
            },
        ],
    }
    assert [b.text for b in blocks.prompt_blocks(prompt)] == ["Review this", "ok", "more"]
    sampling = {"systemPrompt": "Be brief.", "messages": prompt["messages"], "maxTokens": 5}
    got = list(blocks.sampling_request_blocks(sampling))
    assert got[0].type is BlockType.SYSTEM and got[0].text == "Be brief."
    assert [b.text for b in got[1:]] == ["Review this", "ok", "more"]
    (answer,) = blocks.sampling_result_blocks({"role": "assistant", "content": {"type": "text", "text": "4"}})
    assert answer.text == "4"


def test_unknown_block_types_count_as_their_json() -> None:
    item = {"type": "future_thing", "payload": [1, 2]}
    (block,) = blocks.content_blocks([item])
    assert block.type is BlockType.OTHER and block.text == compact(item)


@pytest.mark.parametrize(
    "payload",
    [None, 3, "text", [], {"content": "nope"}, {"content": [None, 5, "x", {"type": 7}]}, {"tools": {"a": 1}}],
)
def test_junk_payloads_give_no_blocks_or_harmless_ones(payload: object) -> None:
    for extract in (
        blocks.tool_result_blocks,
        blocks.tool_list_blocks,
        blocks.resource_blocks,
        blocks.prompt_blocks,
        blocks.sampling_request_blocks,
    ):
        for block in extract(payload):
            assert isinstance(block.text, str)


def test_deep_nesting_does_not_raise() -> None:
    deep: object = "leaf"
    for _ in range(100_000):
        deep = [deep]
    (block,) = list(blocks.tool_result_blocks({"content": [], "structuredContent": deep}))
    assert block.type is BlockType.STRUCTURED and block.text == ""


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_any_json_value_extracts_without_raising(value: object) -> None:
    for extract in (
        blocks.tool_result_blocks,
        blocks.tool_list_blocks,
        blocks.tool_arguments_blocks,
        blocks.resource_blocks,
        blocks.prompt_blocks,
        blocks.sampling_request_blocks,
        blocks.sampling_result_blocks,
    ):
        list(extract(value))
        list(extract({"content": [value], "tools": [value], "contents": [value], "messages": [value]}))
