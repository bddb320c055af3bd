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

from examples import demo_content

ENCODING = "o200k_base"

# The calls the exactness tests make: every text shape (low to critical prose and logs,
# compact and indented JSON, structuredContent, invisible padding) and one image.
EXACT_CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("customer_lookup", {"customer_id": 7}),
    ("customer_lookup", {"customer_id": 99}),
    ("search_orders", {"query": "late", "limit": 20}),
    ("quarterly_report", {"quarter": "2025-Q4"}),
    ("export_audit_log", {"days": 3}),
    ("inventory_pretty", {"warehouse": "osl"}),
    ("shipment_status", {"order_id": 777}),
    ("policy_document", {}),
    ("render_chart", {"width": 480, "height": 320}),
)


@cache
def encoding() -> Any:
    from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding

    return load_bundled_encoding(ENCODING)


def text_tokens(text: str) -> int:
    return len(encoding().encode_ordinary(text))


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


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
