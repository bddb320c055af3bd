# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What an MCP payload shows a model, as a list of content blocks.

The rules here are the contract users compare our counts against (docs/telemetry.md):

- text: the text; embedded resource: its text, or its blob by MIME type (images and
  audio are estimated from the media, text-like blobs are decoded, other blobs count as
  the base64 a client would inline); resource_link and unknown block types: their
  compact JSON; structuredContent: its compact JSON.
- tool definitions: per tool, the compact JSON of the fields a model is given (name,
  title, description, inputSchema, outputSchema, annotations), in wire order.
- tool arguments: their compact JSON; prompts: each message's content; sampling: each
  message's content and the system prompt.

Payloads are wire JSON (dicts) from any SDK version, and hostile: every accessor
tolerates missing keys, wrong types and junk without raising.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from collections.abc import Collection, Iterator, Mapping
from enum import Enum
from typing import NamedTuple

from .compact import compact_json

# Fields of a tool definition that reach the model. `_meta`, `icons` and `execution`
# are client-side metadata and are not shown to it.
TOOL_DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")

# A blob whose MIME type says text is decoded up to this size; past it the decoded
# size is extrapolated from the base64 length (decoding 30 MB just to count it would
# double memory for no gain in accuracy).
_TEXT_BLOB_DECODE_LIMIT = 8 << 20

_TEXTUAL_MIME_PREFIXES = ("text/",)
_TEXTUAL_MIME_SUFFIXES = ("json", "xml", "yaml", "javascript", "csv", "toml", "x-sh", "sql", "graphql")


class BlockType(str, Enum):
    TEXT = "text"
    IMAGE = "image"
    AUDIO = "audio"
    RESOURCE = "resource"
    RESOURCE_LINK = "resource_link"
    STRUCTURED = "structured"
    TOOL = "tool"
    ARGUMENTS = "arguments"
    SYSTEM = "system"
    OTHER = "other"


class Block(NamedTuple):
    """One piece of what the model is shown.

    `text` is what gets tokenised; image and audio blocks carry `data` (base64) and
    `mime_type` instead. `json_value` keeps the parsed value of structuredContent so
    duplicates can be recognised without re-parsing.
    """

    type: BlockType
    text: str = ""
    data: str = ""
    mime_type: str | None = None
    name: str | None = None
    json_value: object = None


def tool_result_blocks(result: object) -> Iterator[Block]:
    """Blocks of a CallToolResult: its content, then structuredContent."""
    mapping = _as_mapping(result)
    yield from content_blocks(mapping.get("content"))
    structured = mapping.get("structuredContent")
    if structured is not None:
        yield Block(BlockType.STRUCTURED, text=_safe_compact_json(structured), json_value=structured)


def tool_list_blocks(result: object) -> Iterator[Block]:
    """One block per tool of a tools/list result."""
    for tool in _as_list(_as_mapping(result).get("tools")):
        tool_map = _as_mapping(tool)
        shown = {key: value for key, value in tool_map.items() if key in TOOL_DEFINITION_FIELDS}
        yield Block(BlockType.TOOL, text=_safe_compact_json(shown), name=_optional_str(tool_map.get("name")))


def tool_arguments_blocks(params: object) -> Iterator[Block]:
    """The arguments of a tools/call request (its params, or the arguments alone)."""
    mapping = _as_mapping(params)
    if "arguments" in mapping or "name" in mapping:
        arguments = mapping.get("arguments")
        yield Block(
            BlockType.ARGUMENTS,
            text=_safe_compact_json(arguments if arguments is not None else {}),
            name=_optional_str(mapping.get("name")),
        )
    elif isinstance(params, Mapping):
        yield Block(BlockType.ARGUMENTS, text=_safe_compact_json(params))


def resource_blocks(result: object) -> Iterator[Block]:
    """Blocks of a ReadResourceResult: one per entry of `contents`."""
    for item in _as_list(_as_mapping(result).get("contents")):
        yield _resource_contents_block(_as_mapping(item), BlockType.RESOURCE)


def prompt_blocks(result: object) -> Iterator[Block]:
    """Blocks of a GetPromptResult: the content of each message."""
    for message in _as_list(_as_mapping(result).get("messages")):
        yield from content_blocks(_as_mapping(message).get("content"))


def sampling_request_blocks(params: object) -> Iterator[Block]:
    """Blocks of sampling/createMessage params: the system prompt, then each message."""
    mapping = _as_mapping(params)
    system = mapping.get("systemPrompt")
    if isinstance(system, str) and system:
        yield Block(BlockType.SYSTEM, text=system)
    for message in _as_list(mapping.get("messages")):
        yield from content_blocks(_as_mapping(message).get("content"))


def sampling_result_blocks(result: object) -> Iterator[Block]:
    """Blocks of a CreateMessageResult: its content (one block or a list)."""
    yield from content_blocks(_as_mapping(result).get("content"))


def content_blocks(content: object) -> Iterator[Block]:
    """Blocks of a content list, or of a single content block (sampling messages)."""
    items = [content] if isinstance(content, Mapping) else _as_list(content)
    for item in items:
        yield content_block(item)


def content_block(item: object) -> Block:
    mapping = _as_mapping(item)
    kind = mapping.get("type")
    if kind == "text":
        return Block(BlockType.TEXT, text=_as_str(mapping.get("text")))
    if kind in ("image", "audio"):
        return Block(
            BlockType.IMAGE if kind == "image" else BlockType.AUDIO,
            data=_as_str(mapping.get("data")),
            mime_type=_optional_str(mapping.get("mimeType")),
        )
    if kind == "resource":
        return _resource_contents_block(_as_mapping(mapping.get("resource")), BlockType.RESOURCE)
    if kind == "resource_link":
        return Block(BlockType.RESOURCE_LINK, text=_safe_compact_json(item))
    return Block(BlockType.OTHER, text=_safe_compact_json(item))


def _resource_contents_block(contents: Mapping[str, object], text_type: BlockType) -> Block:
    mime_type = _optional_str(contents.get("mimeType"))
    text = contents.get("text")
    if isinstance(text, str):
        return Block(text_type, text=text, mime_type=mime_type)
    blob = _as_str(contents.get("blob"))
    media = (mime_type or "").lower()
    if media.startswith("image/"):
        return Block(BlockType.IMAGE, data=blob, mime_type=mime_type)
    if media.startswith("audio/"):
        return Block(BlockType.AUDIO, data=blob, mime_type=mime_type)
    decoded = _decode_text_blob(blob) if _is_textual(media) or not media else None
    return Block(text_type, text=decoded if decoded is not None else blob, mime_type=mime_type)


def _is_textual(mime_type: str) -> bool:
    base = mime_type.split(";", 1)[0].strip()
    return base.startswith(_TEXTUAL_MIME_PREFIXES) or base.endswith(_TEXTUAL_MIME_SUFFIXES)


def _decode_text_blob(blob: str) -> str | None:
    """The UTF-8 text inside a base64 blob, or None when it is not text."""
    if not blob or len(blob) > _TEXT_BLOB_DECODE_LIMIT:
        return None
    try:
        raw = base64.b64decode(blob, validate=False)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _safe_compact_json(value: object) -> str:
    """Compact JSON, or "" for values too deep (or too odd) to serialise: never raises."""
    try:
        return compact_json(value)
    except (ValueError, TypeError, RecursionError):
        return ""


def _as_mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _as_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


# `payload_chars` expands at most this many lists and dicts, and reads at most this many
# elements of any one (evenly spread), scaling what it finds by the elements it skipped.
_WEIGHT_NODE_BUDGET = 128
_WEIGHT_SAMPLE = 8
# Leaves that hold no text: skipped before the abstract-class check a custom mapping needs.
_SCALARS = frozenset({int, float, bool, type(None), bytes})
_CONTAINERS = frozenset({dict, list, tuple})


def payload_chars(payload: object) -> int:
    """About how many characters a payload's strings hold, from a bounded sample.

    It weighs every exchange (the worker queue's memory bound, and the length an estimate
    is made from), on the caller's path when the worker is behind, so it must cost the
    same few microseconds for a 1 KB result and a 20 MB listing: it expands at most
    `_WEIGHT_NODE_BUDGET` containers, reads at most `_WEIGHT_SAMPLE` elements of each and
    scales them up, and reads a string's length in O(1).
    """
    if type(payload) is str:
        return len(payload)
    chars = 0.0
    budget = _WEIGHT_NODE_BUDGET
    # Breadth first, a level at a time (the large strings of MCP results sit near the top:
    # content[].text), over containers only: a string child is summed where it is found.
    # Each container goes with how many of the payload's values it stands for.
    level: list[tuple[object, float]] = [(payload, 1.0)]
    while level:
        below: list[tuple[object, float]] = []
        for node, scale in level:
            if budget <= 0:
                return int(chars)
            budget -= 1
            # Inline, and exact types first: this runs on every call.
            sample: Collection[object]
            if isinstance(node, dict):
                count, sample = len(node), node.values()
                if count > _WEIGHT_SAMPLE:
                    sample = list(itertools.islice(sample, _WEIGHT_SAMPLE))
            elif isinstance(node, (list, tuple)):
                count, sample = len(node), node
                if count > _WEIGHT_SAMPLE:  # spread evenly (a dict above takes its first ones)
                    sample = node[:: count // _WEIGHT_SAMPLE][:_WEIGHT_SAMPLE]
            elif isinstance(node, Mapping):
                count, sample = len(node), list(itertools.islice(node.values(), _WEIGHT_SAMPLE))
            else:
                continue
            if not count:
                continue
            each = scale * count / len(sample)
            for child in sample:
                kind = type(child)
                if kind is str:
                    chars += each * len(child)  # type: ignore[arg-type]
                elif kind in _CONTAINERS or (kind not in _SCALARS and isinstance(child, Mapping)):
                    below.append((child, each))
        level = below
    return int(chars)
