# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The analysis of one MCP payload: tokens per block, overhead, risk and padding.

`Analyzer.analyze(kind, payload)` takes wire JSON and returns an immutable `Analysis`.
It never raises: a payload it cannot take apart is estimated from its compact JSON and
the analysis says so in `error`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum

from . import blocks as _blocks
from .blocks import Block, BlockType
from .compact import compact_json
from .content import classify
from .estimate import estimate_tokens
from .images import ImageModel, MediaEstimate, estimate_audio, estimate_image
from .overhead import BlockOverhead, OverheadKind, find_overhead
from .padding import PaddingFinding, detect_padding
from .risk import DEFAULT_RISK_THRESHOLDS, RiskThresholds, RiskTier
from .structure import find_structure_overhead
from .tokenizer import TokenCounter

_logger = logging.getLogger(__name__)

# Per-block detail kept in an Analysis; totals always cover every block.
MAX_BLOCK_DETAIL = 1024
# Padding detectors run on text blocks only; one finding per reason per block, and at
# most this many findings per payload, so telemetry stays bounded.
MAX_PADDING_FINDINGS = 32

_MEDIA_TYPES = frozenset({BlockType.IMAGE, BlockType.AUDIO})


class PayloadKind(str, Enum):
    TOOL_RESULT = "tool_result"
    TOOL_LIST = "tool_list"
    TOOL_ARGUMENTS = "tool_arguments"
    RESOURCE = "resource"
    PROMPT = "prompt"
    SAMPLING_REQUEST = "sampling_request"
    SAMPLING_RESULT = "sampling_result"


_EXTRACTORS: dict[PayloadKind, Callable[[object], Iterator[Block]]] = {
    PayloadKind.TOOL_RESULT: _blocks.tool_result_blocks,
    PayloadKind.TOOL_LIST: _blocks.tool_list_blocks,
    PayloadKind.TOOL_ARGUMENTS: _blocks.tool_arguments_blocks,
    PayloadKind.RESOURCE: _blocks.resource_blocks,
    PayloadKind.PROMPT: _blocks.prompt_blocks,
    PayloadKind.SAMPLING_REQUEST: _blocks.sampling_request_blocks,
    PayloadKind.SAMPLING_RESULT: _blocks.sampling_result_blocks,
}


def payload_texts(kind: PayloadKind, payload: object) -> list[str]:
    """The texts a payload shows a model (its blocks by the rules of blocks.py), media left
    out: what hosts measure a result's size on."""
    return [
        block.text
        for block in _EXTRACTORS[kind](payload)
        if block.type not in (BlockType.IMAGE, BlockType.AUDIO)
    ]


@dataclass(frozen=True, slots=True)
class BlockAnalysis:
    index: int
    type: BlockType
    tokens: int
    exact: bool
    name: str | None = None
    overhead: BlockOverhead | None = None
    media: MediaEstimate | None = None


# Not slotted: it crosses from the counting service to the application for every exchange,
# and a frozen slotted dataclass unpickles through Python-level __setstate__ (five times slower).
@dataclass(frozen=True)
class Analysis:
    kind: PayloadKind
    tokens: int
    encoding: str
    exact: bool
    risk: RiskTier
    blocks: tuple[BlockAnalysis, ...] = ()
    block_count: int = 0
    overhead: tuple[tuple[OverheadKind, int], ...] = ()
    padding: tuple[PaddingFinding, ...] = ()
    error: str | None = None

    @property
    def overhead_tokens(self) -> int:
        return sum(tokens for _, tokens in self.overhead)

    @property
    def overhead_ratio(self) -> float:
        """Overhead tokens over all tokens, in [0, 1]."""
        return min(1.0, self.overhead_tokens / self.tokens) if self.tokens > 0 else 0.0

    @property
    def tool_definitions(self) -> tuple[tuple[str, int], ...]:
        """(tool name, definition tokens) for a tools/list analysis."""
        return tuple((b.name, b.tokens) for b in self.blocks if b.type is BlockType.TOOL and b.name)


@dataclass(frozen=True)
class AnalyzerOptions:
    risk_thresholds: RiskThresholds = DEFAULT_RISK_THRESHOLDS
    image_model: ImageModel = ImageModel.ANTHROPIC
    overhead_pattern: re.Pattern[str] | None = None
    detect_padding: bool = True


class Analyzer:
    """Turns wire payloads into analyses with one token counter and one set of options."""

    def __init__(self, counter: TokenCounter, options: AnalyzerOptions | None = None) -> None:
        self._counter = counter
        self._options = options or AnalyzerOptions()

    @property
    def counter(self) -> TokenCounter:
        return self._counter

    @property
    def options(self) -> AnalyzerOptions:
        return self._options

    def analyze(self, kind: PayloadKind, payload: object) -> Analysis:
        try:
            return self._analyze(kind, list(_EXTRACTORS[kind](payload)))
        except Exception as exc:  # hostile payloads must never reach the caller as errors
            _logger.debug("mcp-tokens could not analyse a %s payload", kind.value, exc_info=True)
            return self._estimate_whole(kind, payload, exc)

    def _analyze(self, kind: PayloadKind, payload_blocks: list[Block]) -> Analysis:
        results = [self._measure(index, block) for index, block in enumerate(payload_blocks)]
        tokens = [result.tokens for result in results]
        overheads = find_overhead(
            payload_blocks, tokens, self._count_tokens, marker=self._options.overhead_pattern
        )
        structure = find_structure_overhead(payload_blocks, tokens, overheads, self._count_tokens)
        results = [
            dataclasses.replace(result, overhead=overhead) if overhead else result
            for result, overhead in zip(results, overheads, strict=True)
        ]
        total = sum(tokens)
        return Analysis(
            kind=kind,
            tokens=total,
            encoding=self._counter.name,
            exact=all(r.exact for r in results if r.type not in _MEDIA_TYPES),
            risk=self._options.risk_thresholds.classify(total),
            blocks=tuple(results[:MAX_BLOCK_DETAIL]),
            block_count=len(results),
            overhead=_sum_by_kind(overheads, structure),
            padding=self._padding(payload_blocks, results) if self._options.detect_padding else (),
        )

    def _measure(self, index: int, block: Block) -> BlockAnalysis:
        if block.type is BlockType.IMAGE:
            media = estimate_image(block.data, block.mime_type, self._options.image_model)
            return BlockAnalysis(index, block.type, media.tokens, False, block.name, media=media)
        if block.type is BlockType.AUDIO:
            media = estimate_audio(block.data, block.mime_type)
            return BlockAnalysis(index, block.type, media.tokens, False, block.name, media=media)
        counted = self._counter.count(block.text)
        return BlockAnalysis(index, block.type, counted.tokens, counted.exact, block.name)

    def _count_tokens(self, text: str) -> int:
        return self._counter.count(text).tokens

    def _padding(
        self, payload_blocks: list[Block], results: list[BlockAnalysis]
    ) -> tuple[PaddingFinding, ...]:
        findings: list[PaddingFinding] = []
        for block, result in zip(payload_blocks, results, strict=True):
            if block.type in _MEDIA_TYPES or not block.text or _is_duplicate(result):
                continue
            for finding in detect_padding(
                block.text, tokens=result.tokens, content_type=classify(block.text)
            ):
                findings.append(dataclasses.replace(finding, block=result.index))
                if len(findings) >= MAX_PADDING_FINDINGS:
                    return tuple(findings)
        return tuple(findings)

    def _estimate_whole(self, kind: PayloadKind, payload: object, exc: Exception) -> Analysis:
        try:
            tokens = estimate_tokens(compact_json(payload))
        except Exception:
            tokens = 0
        return Analysis(
            kind=kind,
            tokens=tokens,
            encoding="estimate",
            exact=False,
            risk=self._options.risk_thresholds.classify(tokens),
            error=type(exc).__name__,
        )


def _is_duplicate(result: BlockAnalysis) -> bool:
    return result.overhead is not None and result.overhead.kind is OverheadKind.DUPLICATE


def _sum_by_kind(
    overheads: list[BlockOverhead | None], structure: list[int]
) -> tuple[tuple[OverheadKind, int], ...]:
    totals: dict[OverheadKind, int] = {}
    for overhead in overheads:
        if overhead is not None:
            totals[overhead.kind] = totals.get(overhead.kind, 0) + overhead.tokens
    if any(structure):
        totals[OverheadKind.STRUCTURE] = sum(structure)
    return tuple((kind, totals[kind]) for kind in OverheadKind if kind in totals)
