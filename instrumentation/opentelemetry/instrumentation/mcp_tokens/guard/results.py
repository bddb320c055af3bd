# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Measuring a tools/call or resources/read result against a limit, and cutting it to fit.

Results are wire dicts, read by the block rules of docs/telemetry.md (engine/blocks.py):
each entry of `content` (or `contents`), then structuredContent as compact JSON; images
and audio by the provider formula. Nothing here mutates a result: a cut result is a new
dict that shares every entry it keeps whole.

Cutting keeps a prefix of what the model would read: entries in order while they fit;
the first that does not is cut at a token boundary when it is text (a text block, an
embedded resource's text, a text resource), becomes a one-line note when it is an image
or audio, and is dropped otherwise; everything after it is dropped. structuredContent is
never cut (it must stay valid against the tool's outputSchema): the text, which the spec
advises should repeat it, is shortened first, and a structuredContent over the limit on
its own turns the result into an error result carrying the notice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine import blocks as engine_blocks
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import Block, BlockType
from opentelemetry.instrumentation.mcp_tokens.engine.estimate import estimate_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel, estimate_audio, estimate_image

from .tokens import Measuring

TOOLS_CALL = "tools/call"
RESOURCES_READ = "resources/read"

# Attempts at fitting the notice, whose own size depends on the numbers it states.
_NOTICE_ROUNDS = 4

Notice = Callable[[int], str]  # delivered tokens -> the notice text


@dataclass
class Entry:
    """One entry of a result's content (or contents) list, as the model would read it."""

    item: object
    block: Block
    tokens: int | None = None  # exact, once counted

    @property
    def is_media(self) -> bool:
        return self.block.type in (BlockType.IMAGE, BlockType.AUDIO)


@dataclass
class Assessment:
    """A result read against a limit: whether it fits, and what counting it took."""

    method: str
    result: Mapping[str, Any]
    entries: list[Entry]
    structured: Entry | None
    fits: bool
    # Exact tokens of the whole result, when counted (it fits, or the caller asked for it).
    tokens: int | None = None
    counted_all: bool = field(default=False)


@dataclass(frozen=True)
class Shaped:
    result: dict[str, Any]
    delivered: int  # exact tokens of `result`, notice included


class Results:
    """Reads, counts and cuts results with one measure (guard/tokens.py) and one image formula.

    `measure` is called only when something must be counted: a result that fits by its
    size alone never waits for the tokenizer.
    """

    def __init__(
        self,
        measure: Callable[[], Measuring],
        image_model: ImageModel,
        size_bound: Callable[[str, int], int] | None = None,
    ) -> None:
        self._get_measure = measure
        self._image_model = image_model
        # An upper bound of a text's tokens from its size alone (default: its UTF-8 size,
        # which holds for tiktoken encodings; Claude's is 8 per character plus 2).
        self._text_bound = size_bound or _utf8_size_upto

    @property
    def _measure(self) -> Measuring:
        return self._get_measure()

    # --- reading ---------------------------------------------------------------------
    def assess(
        self, method: str, result: Mapping[str, Any], limit: int, *, count: bool = False
    ) -> Assessment:
        """Whether `result` fits `limit` tokens, counting as little as deciding needs
        (`count`: count it exactly, up to the limit, even when its size alone decides)."""
        assessment = self.read(method, result)
        everything = self._all(assessment)
        if not count and self._size_bound(everything, limit) <= limit:
            assessment.fits = True
            return assessment
        total = 0
        for entry in everything:
            tokens = self._tokens_upto(entry, limit - total)
            if tokens is None:
                return assessment
            total += tokens
        assessment.fits, assessment.tokens, assessment.counted_all = True, total, True
        return assessment

    def read(self, method: str, result: Mapping[str, Any]) -> Assessment:
        """The result's entries, nothing counted (`fits` False until something says so)."""
        entries, structured = self._entries(method, result)
        return Assessment(method, result, entries, structured, fits=False)

    def original_tokens(self, assessment: Assessment) -> tuple[int, bool]:
        """The result's tokens: exact when counting covered it all, else the counted
        entries plus the content-aware estimate of the others (exact=False)."""
        if assessment.tokens is not None:
            return assessment.tokens, True
        total, exact = 0, True
        for entry in self._all(assessment):
            if entry.tokens is None and entry.is_media:
                entry.tokens = self._media_tokens(entry.block)
            if entry.tokens is None:
                total += estimate_tokens(entry.block.text)
                exact = False
            else:
                total += entry.tokens
        return total, exact

    def exact_tokens(self, assessment: Assessment) -> int:
        """Every entry counted exactly (off the response path: the accountant)."""
        total = 0
        for entry in self._all(assessment):
            if entry.tokens is None:
                entry.tokens = (
                    self._media_tokens(entry.block)
                    if entry.is_media
                    else self._measure.count(entry.block.text)
                )
            total += entry.tokens
        return total

    # --- shaping ---------------------------------------------------------------------
    def truncate(self, assessment: Assessment, limit: int, notice: Notice) -> Shaped:
        """The longest prefix of the result that fits `limit` with the notice appended."""
        structured_tokens = 0
        if assessment.structured is not None:
            counted = self._tokens_upto(assessment.structured, limit)
            if counted is None:
                return self.replace(assessment, limit, notice)
            structured_tokens = counted
        reserve = self._measure.count(notice(limit))
        for _ in range(_NOTICE_ROUNDS):
            room = limit - structured_tokens - reserve
            if room < 0:
                return self.replace(assessment, limit, notice)
            kept, kept_tokens = self._prefix(assessment, room)
            body = kept_tokens + structured_tokens
            text, notice_tokens = self._settle_notice(notice, body)
            if body + notice_tokens <= limit:
                items = [*kept, self._note(assessment, text)]
                return Shaped(self._with_entries(assessment, items), body + notice_tokens)
            reserve = notice_tokens + (body + notice_tokens - limit)
        return self.replace(assessment, limit, notice)

    def replace(self, assessment: Assessment, limit: int, notice: Notice, *, error: bool = True) -> Shaped:
        """The notice alone (an error result for tools/call when `error`), within `limit`."""
        text, tokens = self._settle_notice(notice, 0)
        if tokens > limit:
            chars, tokens = self._measure.prefix(text, limit)
            text = text[:chars]
        result = {
            key: value
            for key, value in assessment.result.items()
            if key not in ("content", "contents", "structuredContent")
        }
        if assessment.method == TOOLS_CALL:
            result["content"] = [{"type": "text", "text": text}] if text else []
            if error:
                result["isError"] = True
        else:
            result["contents"] = [self._note(assessment, text)] if text else []
        return Shaped(result, tokens)

    # --- internals -------------------------------------------------------------------
    def _entries(self, method: str, result: Mapping[str, Any]) -> tuple[list[Entry], Entry | None]:
        if method == TOOLS_CALL:
            items = _as_list(result.get("content"))
            entries = [Entry(item, engine_blocks.content_block(item)) for item in items]
            structured = result.get("structuredContent")
            if structured is None:
                return entries, None
            block = next(engine_blocks.tool_result_blocks({"structuredContent": structured}))
            return entries, Entry(structured, block)
        items = _as_list(result.get("contents"))
        entries = [Entry(item, next(engine_blocks.resource_blocks({"contents": [item]}))) for item in items]
        return entries, None

    @staticmethod
    def _all(assessment: Assessment) -> list[Entry]:
        structured = [assessment.structured] if assessment.structured is not None else []
        return [*assessment.entries, *structured]

    def _size_bound(self, entries: list[Entry], limit: int) -> int:
        """An upper bound of the entries' tokens, from sizes alone."""
        bound = 0
        for entry in entries:
            if entry.is_media:
                entry.tokens = self._media_tokens(entry.block)
                bound += entry.tokens
            else:
                bound += self._text_bound(entry.block.text, limit - bound)
            if bound > limit:
                break
        return bound

    def _tokens_upto(self, entry: Entry, budget: int) -> int | None:
        if entry.tokens is None:
            if entry.is_media:
                entry.tokens = self._media_tokens(entry.block)
            else:
                entry.tokens = self._measure.count_upto(entry.block.text, max(0, budget))
                if entry.tokens is None:
                    return None
        return entry.tokens if entry.tokens <= budget else None

    def _media_tokens(self, block: Block) -> int:
        if block.type is BlockType.IMAGE:
            return estimate_image(block.data, block.mime_type, self._image_model).tokens
        return estimate_audio(block.data, block.mime_type).tokens

    def _prefix(self, assessment: Assessment, room: int) -> tuple[list[object], int]:
        kept: list[object] = []
        used = 0
        for entry in assessment.entries:
            tokens = self._tokens_upto(entry, room - used)
            if tokens is not None:
                kept.append(entry.item)
                used += tokens
                continue
            cut = self._cut(assessment, entry, room - used)
            if cut is not None:
                kept.append(cut[0])
                used += cut[1]
            break
        return kept, used

    def _cut(self, assessment: Assessment, entry: Entry, room: int) -> tuple[object, int] | None:
        """What stands for an entry that does not fit in `room` tokens (None: nothing)."""
        if room <= 0:
            return None
        if entry.is_media:
            kind = "image" if entry.block.type is BlockType.IMAGE else "audio"
            line = f"[{kind} left out by mcp-tokens: about {entry.tokens or 0:,} tokens, more than was left]"
            tokens = self._measure.count(line)
            return (self._note(assessment, line, entry.item), tokens) if tokens <= room else None
        path = _text_path(assessment.method, entry.item)
        if path is None:
            return None
        chars, tokens = self._measure.prefix(entry.block.text, room)
        if chars == 0:
            return None
        return _replace_text(entry.item, path, entry.block.text[:chars]), tokens

    def _settle_notice(self, notice: Notice, body: int) -> tuple[str, int]:
        """The notice stating the delivered total it is part of (its own tokens included)."""
        tokens = 0
        text = notice(body)
        for _ in range(_NOTICE_ROUNDS):
            text = notice(body + tokens)
            counted = self._measure.count(text)
            if counted == tokens:
                break
            tokens = counted
        return text, tokens

    def _note(self, assessment: Assessment, text: str, near: object = None) -> object:
        if assessment.method == TOOLS_CALL:
            return {"type": "text", "text": text}
        uri = _as_mapping(near).get("uri") if near is not None else None
        if not isinstance(uri, str):
            contents = map(_as_mapping, _as_list(assessment.result.get("contents")))
            uri = next((entry.get("uri") for entry in contents), None)
        return {"uri": uri if isinstance(uri, str) else "", "mimeType": "text/plain", "text": text}

    @staticmethod
    def _with_entries(assessment: Assessment, items: list[object]) -> dict[str, Any]:
        result = dict(assessment.result)
        result["content" if assessment.method == TOOLS_CALL else "contents"] = items
        return result


def _text_path(method: str, item: object) -> tuple[str, ...] | None:
    """Where an entry's cuttable text sits (None: the entry is not text)."""
    mapping = _as_mapping(item)
    if method == RESOURCES_READ:
        return ("text",) if isinstance(mapping.get("text"), str) else None
    kind = mapping.get("type")
    if kind == "text" and isinstance(mapping.get("text"), str):
        return ("text",)
    if kind == "resource" and isinstance(_as_mapping(mapping.get("resource")).get("text"), str):
        return ("resource", "text")
    return None


def _replace_text(item: object, path: tuple[str, ...], text: str) -> dict[str, Any]:
    mapping = dict(_as_mapping(item))
    if len(path) == 1:
        mapping[path[0]] = text
    else:
        mapping[path[0]] = _replace_text(mapping.get(path[0]), path[1:], text)
    return mapping


def _utf8_size_upto(text: str, limit: int) -> int:
    """The UTF-8 size of `text`, or a number over `limit` once it is known to exceed it
    (copies at most `limit` characters)."""
    length = len(text)
    if length > limit or text.isascii():
        return length
    if 4 * length <= limit:
        return 4 * length
    return len(text.encode("utf-8", "surrogatepass"))


def _as_mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
