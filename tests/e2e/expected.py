# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact token counts of the demo tools' payloads, computed here independently of the engine:
tiktoken's o200k_base (bundled, offline) and the block rules of docs/telemetry.md.

- tools/call request: the compact JSON of `arguments`, one block.
- tools/call result: each `content` entry (text: its text; image: the Anthropic formula from
  the PNG's own size), then `structuredContent` as compact JSON.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.risk import DEFAULT_RISK_THRESHOLDS
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding

from examples import demo_content
from tests.structure_expected import structure_tokens

ENCODING = "o200k_base"

# The calls the exactness tests make: every text shape (low to critical prose and logs,
# compact and indented JSON, structuredContent, invisible padding) and one image.
EXACT_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("customer_lookup", {"customer_id": 7}),
    ("customer_lookup", {"customer_id": 99}),
    ("search_orders", {"query": "late", "limit": 20}),
    ("quarterly_report", {"quarter": "2025-Q4"}),
    ("export_audit_log", {"days": 10}),
    ("inventory_pretty", {"warehouse": "osl"}),
    ("shipment_status", {"order_id": 777}),
    ("policy_document", {}),
    ("render_chart", {"width": 480, "height": 320}),
)


@cache
def encoding() -> Any:
    return load_bundled_encoding(ENCODING)


def text_tokens(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def result_tokens(result: dict[str, Any]) -> int:
    """A tools/call result's tokens, from what a client received (text blocks only)."""
    total = 0
    for block in result.get("content", []):
        assert block["type"] == "text", f"no exact rule in this test for {block['type']!r} blocks"
        total += text_tokens(block["text"])
    if result.get("structuredContent") is not None:
        total += text_tokens(compact(result["structuredContent"]))
    return total


DEFINITION_FIELDS = ("name", "title", "description", "inputSchema", "outputSchema", "annotations")


def definition_tokens(tool: dict[str, Any]) -> int:
    """A listed tool's definition tokens: the compact JSON of its shown fields, in the order of
    `tool` (pass the wire's dict, or a re-dump that keeps the wire's order)."""
    return text_tokens(compact({k: v for k, v in tool.items() if k in DEFINITION_FIELDS and v is not None}))


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's published estimate, ceil(w*h/750), for an image small enough that it is not
    downscaled first (long edge <= 1568 px, area well under 1.2 MP)."""
    if max(width, height) > 1568 or width * height > 1_150_000:
        raise ValueError(f"{width}x{height} would be downscaled; pick a smaller image for exact tests")
    return math.ceil(width * height / 750)


def request_tokens(arguments: dict[str, Any]) -> int:
    return text_tokens(compact(arguments))


def response_tokens(tool: str, arguments: dict[str, Any]) -> int:
    result = demo_content.tool_result(tool, arguments)
    total = 0
    for block in result["content"]:
        if block["type"] == "text":
            total += text_tokens(block["text"])
        elif block["type"] == "image":
            total += anthropic_image_tokens(int(arguments["width"]), int(arguments["height"]))
        else:
            raise ValueError(f"no exact rule in this test for block type {block['type']!r}")
    if "structuredContent" in result:
        total += text_tokens(compact(result["structuredContent"]))
    return total


@dataclass(frozen=True)
class ToolTotals:
    calls: int
    request: int
    response: int


def totals_by_tool(calls: tuple[tuple[str, dict[str, Any]], ...] = EXACT_CALLS) -> dict[str, ToolTotals]:
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for tool, arguments in calls:
        entry = sums[tool]
        entry[0] += 1
        entry[1] += request_tokens(arguments)
        entry[2] += response_tokens(tool, arguments)
    return {tool: ToolTotals(*entry) for tool, entry in sums.items()}


def overhead_by_tool_and_kind(
    calls: tuple[tuple[str, dict[str, Any]], ...] = EXACT_CALLS,
) -> dict[tuple[str, str], int]:
    """Response overhead the docs define, for the demo's shapes: an indented JSON text block
    costs its tokens minus those of its compact form (`formatting`); structuredContent that
    repeats a text block costs all its tokens (`duplicate`); arrays of uniform records cost the
    tokens a tabular form would save (`structure`). Zero entries are left out."""
    found: dict[tuple[str, str], int] = defaultdict(int)
    for tool, arguments in calls:
        result = demo_content.tool_result(tool, arguments)
        texts = [block["text"] for block in result["content"] if block["type"] == "text"]
        for text in texts:
            try:
                value = json.loads(text)
            except ValueError:
                continue
            saving = text_tokens(text) - text_tokens(compact(value))
            if saving:
                found[(tool, "formatting")] += saving
            found[(tool, "structure")] += structure_tokens(value, text_tokens(text), text_tokens)
        structured = result.get("structuredContent")
        if structured is not None and any(_parses_to(text, structured) for text in texts):
            found[(tool, "duplicate")] += text_tokens(compact(structured))
        elif structured is not None:
            tokens = text_tokens(compact(structured))
            found[(tool, "structure")] += structure_tokens(structured, tokens, text_tokens)
    return {key: tokens for key, tokens in found.items() if tokens}
    return dict(found)


def _parses_to(text: str, value: object) -> bool:
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def risk_by_tool(calls: tuple[tuple[str, dict[str, Any]], ...] = EXACT_CALLS) -> dict[tuple[str, str], int]:
    """(tool, risk tier) -> responses, with the default thresholds (1000, 4000, 8000)."""
    found: dict[tuple[str, str], int] = defaultdict(int)
    for tool, arguments in calls:
        found[(tool, DEFAULT_RISK_THRESHOLDS.classify(response_tokens(tool, arguments)).value)] += 1
    return dict(found)
