# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Tokens that carry no data: duplicates, JSON formatting waste and marked blocks.

Each block is charged to at most one kind, in this order of precedence:

- marked: the block matches the user's overhead pattern (injected rules, affordance
  or UI blocks); all its tokens are overhead. The pattern is searched in the first
  `MARKER_SCAN_CHARS` characters only, so a hostile 20 MB block cannot make a user's
  regex run long.
- duplicate: a block identical to an earlier one, or structuredContent whose value is
  already shown as a text block (the backwards-compatible copy the MCP spec asks for), or
  that wraps what the text blocks show as `{"result": value}` (the frameworks' wrapping of
  a str, number, boolean or list return); all its tokens are overhead. Text blocks up to
  `FULL_FORMAT_CHARS` are compared by parsed value; larger ones by their whitespace-free
  form. The text copy stays the data, so the model-visible content is counted once.
- formatting: a JSON text block's tokens minus those of its compact form
  (`separators=(",", ":")`, `ensure_ascii=False`). Blocks up to `FULL_FORMAT_CHARS`
  are parsed and re-serialised exactly. Larger blocks are not parsed: four evenly spaced
  windows of whole lines (`FORMAT_SAMPLE_CHARS` in all) have their insignificant
  whitespace stripped, both forms of that sample are counted, and the block's overhead is
  its token count times the sample's saving ratio. This keeps the cost of a 1 MB block to two 64 KiB counts
  instead of a second full count.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from .blocks import Block, BlockType
from .compact import compact_json
from .jsontext import NOT_JSON, looks_like_json, parse_json

MARKER_SCAN_CHARS = 64 << 10
FULL_FORMAT_CHARS = 64 << 10
FORMAT_SAMPLE_CHARS = 64 << 10
FORMAT_SAMPLE_WINDOWS = 4

_TEXT_TYPES = frozenset({BlockType.TEXT, BlockType.RESOURCE})
# A number, boolean or null shown as text is short; longer texts are not parsed as scalars.
_SCALAR_CHARS = 64
# A JSON string literal (kept), or a run of whitespace outside one (dropped).
_STRING_OR_SPACE = re.compile(r'("(?:[^"\\]|\\.)*")|\s+')


class OverheadKind(str, Enum):
    DUPLICATE = "duplicate"
    FORMATTING = "formatting"
    MARKED = "marked"
    STRUCTURE = "structure"  # measured by engine/structure.py, on top of formatting


@dataclass(frozen=True, slots=True)
class BlockOverhead:
    kind: OverheadKind
    tokens: int


def find_overhead(
    blocks: Sequence[Block],
    tokens: Sequence[int],
    count: Callable[[str], int],
    *,
    marker: re.Pattern[str] | None = None,
) -> list[BlockOverhead | None]:
    """Overhead of each block (None when the block is all data).

    `tokens[i]` is the token count of `blocks[i]`; `count` counts a string (it is used
    for compact forms only).
    """
    scan = _PayloadScan(blocks, count, marker)
    return [scan.overhead_of(index, tokens[index]) for index in range(len(blocks))]


class _PayloadScan:
    """One pass over a payload's blocks, remembering what earlier blocks showed."""

    def __init__(
        self, blocks: Sequence[Block], count: Callable[[str], int], marker: re.Pattern[str] | None
    ) -> None:
        self._blocks = blocks
        self._count = count
        self._marker = marker
        self._parsed: dict[int, object] = {}
        # Earlier blocks by type, length and a strided sample of their text: hashing a whole
        # 20 MB text would keep the GIL for milliseconds, comparing equal texts is a memcmp.
        self._seen: dict[tuple[BlockType, int, str], list[str]] = {}

    def overhead_of(self, index: int, tokens: int) -> BlockOverhead | None:
        block = self._blocks[index]
        if tokens <= 0:
            return None
        if self._marker is not None and block.text and self._marker.search(block.text, 0, MARKER_SCAN_CHARS):
            return BlockOverhead(OverheadKind.MARKED, tokens)
        if self._repeats_earlier(block):
            return BlockOverhead(OverheadKind.DUPLICATE, tokens)
        if block.type is BlockType.STRUCTURED and self._shown_as_text(block, index):
            return BlockOverhead(OverheadKind.DUPLICATE, tokens)
        if block.type in _TEXT_TYPES and looks_like_json(block.text):
            waste = self._formatting_tokens(index, block.text, tokens)
            if waste > 0:
                return BlockOverhead(OverheadKind.FORMATTING, waste)
        return None

    def _repeats_earlier(self, block: Block) -> bool:
        """Whether an earlier block of the same type showed the same text (or data); remembers this one."""
        content = block.text or block.data
        sample = content[:: max(1, len(content) // _IDENTITY_SAMPLE_CHARS)]
        earlier = self._seen.setdefault((block.type, len(content), sample), [])
        if any(_same_text(content, other) for other in earlier):
            return True
        # Texts that share length and sample but differ are rare; a payload made of many of
        # them (hostile) must not make this quadratic, so a bucket stops growing.
        if len(earlier) < _IDENTITY_BUCKET_TEXTS:
            earlier.append(content)
        return False

    def _shown_as_text(self, structured: Block, before: int) -> bool:
        for index in range(before):
            block = self._blocks[index]
            if block.type not in _TEXT_TYPES:
                continue
            if _same_text(block.text, structured.text):
                return True
            if len(block.text) > FULL_FORMAT_CHARS:
                # Too large to parse again: compare its whitespace-free form instead (exact for
                # pretty-printed copies; misses copies that also escape non-ASCII characters).
                if (
                    len(structured.text) <= len(block.text)
                    and looks_like_json(block.text)
                    and strip_json_whitespace(block.text) == structured.text
                ):
                    return True
                continue
            value = self._parse_small_json(index, block.text)
            if value is not NOT_JSON and value == structured.json_value:
                return True
        return self._wrapped_result_shown(structured, before)

    def _wrapped_result_shown(self, structured: Block, before: int) -> bool:
        """`{"result": value}` is how MCPServer/FastMCP (both SDK lines) and fastmcp wrap a tool's
        return value that is not an object. It is a copy when the text blocks already show the
        value: as the text itself (a str), as its JSON (numbers, booleans; fastmcp's lists), or
        one block per item, in order (the SDK's lists)."""
        wrapper = structured.json_value
        if not (isinstance(wrapper, dict) and len(wrapper) == 1 and "result" in wrapper):
            return False
        value = wrapper["result"]
        texts = [index for index in range(before) if self._blocks[index].type in _TEXT_TYPES]
        if any(self._shows(index, value) for index in texts):
            return True
        return (
            isinstance(value, list)
            and len(value) == len(texts) > 0
            and all(self._shows(index, item) for index, item in zip(texts, value, strict=True))
        )

    def _shows(self, index: int, value: object) -> bool:
        """Whether text block `index` shows `value`: the same string, or JSON that parses to it."""
        text = self._blocks[index].text
        if isinstance(value, str) and _same_text(text, value):
            return True
        if len(text) <= _SCALAR_CHARS and not looks_like_json(text):
            shown = parse_json(text)
        elif len(text) <= FULL_FORMAT_CHARS:
            shown = self._parse_small_json(index, text)
        else:
            return False
        # `1 == True` in Python, not in JSON.
        same_kind = isinstance(shown, bool) == isinstance(value, bool)
        return shown is not NOT_JSON and same_kind and shown == value

    def _formatting_tokens(self, index: int, text: str, tokens: int) -> int:
        if len(text) <= FULL_FORMAT_CHARS:
            value = self._parse_small_json(index, text)
            if value is NOT_JSON:
                return 0
            compact = compact_json(value)
            return max(0, tokens - self._count(compact)) if compact != text else 0
        sample = _sample_windows(text)
        compact_sample = strip_json_whitespace(sample)
        if compact_sample == sample:
            return 0
        sample_tokens = self._count(sample)
        if sample_tokens <= 0:
            return 0
        saving = 1.0 - self._count(compact_sample) / sample_tokens
        return max(0, round(tokens * saving))

    def _parse_small_json(self, index: int, text: str) -> object:
        if index not in self._parsed:
            small = len(text) <= FULL_FORMAT_CHARS and looks_like_json(text)
            self._parsed[index] = parse_json(text) if small else NOT_JSON
        return self._parsed[index]


def strip_json_whitespace(text: str) -> str:
    """Drop whitespace outside JSON string literals (tolerates a truncated document)."""
    return _STRING_OR_SPACE.sub(lambda match: match.group(1) or "", text)


def _sample_windows(text: str) -> str:
    """`FORMAT_SAMPLE_WINDOWS` evenly spaced runs of whole lines, about FORMAT_SAMPLE_CHARS in all.

    A pretty-printer never breaks a line inside a string literal, so a window that starts
    after a line break starts outside any string and can be compacted on its own. Spreading
    the windows keeps the estimate honest when records change shape along the document.
    """
    width = FORMAT_SAMPLE_CHARS // FORMAT_SAMPLE_WINDOWS
    step = len(text) // FORMAT_SAMPLE_WINDOWS
    windows = []
    for index in range(FORMAT_SAMPLE_WINDOWS):
        start = index * step
        if start:
            start = text.find("\n", start, start + width) + 1
            if start == 0:
                continue
        window = text[start : start + width]
        cut = window.rfind("\n")
        windows.append(window[: cut + 1] if cut > 0 else window)
    return "".join(windows)


# Duplicate detection keys texts by an evenly strided sample of about this many characters,
# and compares a new text with at most this many earlier texts of the same key.
_IDENTITY_SAMPLE_CHARS = 512
_IDENTITY_BUCKET_TEXTS = 8
# Texts are compared this many characters at a time, so no comparison keeps the GIL long.
_COMPARE_STEP = 1 << 20


def _same_text(first: str, second: str) -> bool:
    if first is second:
        return True
    if len(first) != len(second):  # before any slicing
        return False
    if len(first) <= _COMPARE_STEP:
        return first == second
    return all(
        first[start : start + _COMPARE_STEP] == second[start : start + _COMPARE_STEP]
        for start in range(0, len(first), _COMPARE_STEP)
    )
