# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Structure overhead: tokens spent repeating the same keys in every record of an array.

An array of uniform records (`[{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, ...]`)
spells out every key again in every record after the first. A tabular encoding of the same
data (`[["id", "name"], [1, "a"], [2, "b"], ...]`: the keys once, then one row of values per
record) carries exactly the same information. The structure overhead of a block is the
tokens that re-encoding would save, counted with the payload's tokenizer on both forms.

Which arrays count (so ordinary JSON does not turn into noise):

- at least `MIN_RECORDS` elements, every one a JSON object with the same set of keys (in
  any order), at least `MIN_KEYS` keys each;
- the outermost such array only: a table nested inside one record's value is part of that
  record's row;
- a block reports structure overhead only when the arrays' saving is at least `MIN_SHARE`
  of the block's tokens (a few short records inside a long document are not worth a
  finding).

Cost is bounded whatever the payload's size: the search for arrays visits at most
`WALK_NODES` values and measures at most `MAX_ARRAYS` arrays; an array of more than
`SAMPLE_RECORDS` records is measured on that many evenly spaced records (all of which must
share the keys) and the saving scaled by its length. A JSON text block over
`FULL_PARSE_CHARS` is not parsed at all: the records of the first array that starts in its
first `FULL_PARSE_CHARS` characters are decoded one by one (at most `SAMPLE_RECORDS` of
them, `FULL_PARSE_CHARS` in all), and their saving ratio applies to the compact tokens of
the part of the block from that array on.

How it combines with the other kinds (engine/overhead.py): a block charged as `marked` or
`duplicate` is all overhead already and gets no structure overhead. Otherwise `formatting`
is the block's tokens minus those of its compact form and `structure` is the compact form's
tokens minus those of its tabular form, so one block can carry both and no token is
charged twice.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from .blocks import Block, BlockType
from .compact import compact_json
from .jsontext import looks_like_json, parse_json
from .overhead import FULL_FORMAT_CHARS, BlockOverhead, OverheadKind

MIN_RECORDS = 4
MIN_KEYS = 2
MIN_SHARE = 0.05
SAMPLE_RECORDS = 64
MAX_ARRAYS = 16
WALK_NODES = 4096
FULL_PARSE_CHARS = FULL_FORMAT_CHARS

_TEXT_TYPES = frozenset({BlockType.TEXT, BlockType.RESOURCE})
_WHOLE_BLOCK_KINDS = frozenset({OverheadKind.MARKED, OverheadKind.DUPLICATE})
_ARRAY_OF_OBJECTS = re.compile(r"\[\s*\{")
_SEPARATOR = re.compile(r"\s*,?\s*")
_DECODER = json.JSONDecoder()

Record = Mapping[str, object]


def find_structure_overhead(
    blocks: Sequence[Block],
    tokens: Sequence[int],
    overheads: Sequence[BlockOverhead | None],
    count: Callable[[str], int],
) -> list[int]:
    """Structure overhead tokens of each block (0 for most), given the blocks' other overhead."""
    found = []
    for block, block_tokens, other in zip(blocks, tokens, overheads, strict=True):
        if block_tokens <= 0 or (other is not None and other.kind in _WHOLE_BLOCK_KINDS):
            found.append(0)
            continue
        formatting = other.tokens if other is not None and other.kind is OverheadKind.FORMATTING else 0
        try:
            found.append(structure_tokens(block, block_tokens, block_tokens - formatting, count))
        except (RecursionError, ValueError, TypeError):
            # A record too deeply nested (or too odd) to re-encode: no structure finding; the
            # block's count and its other overhead stand.
            found.append(0)
    return found


def structure_tokens(block: Block, tokens: int, compact_tokens: int, count: Callable[[str], int]) -> int:
    """The tokens a tabular encoding of `block`'s record arrays would save (0 below the minimums)."""
    if block.type is BlockType.STRUCTURED:
        saving = _value_saving(block.json_value, count)
    elif block.type in _TEXT_TYPES and looks_like_json(block.text):
        if len(block.text) <= FULL_PARSE_CHARS:
            saving = _value_saving(parse_json(block.text), count)
        else:
            saving = _large_text_saving(block.text, compact_tokens, count)
    else:
        return 0
    if saving < MIN_SHARE * tokens:
        return 0
    return min(round(saving), compact_tokens)


def _value_saving(value: object, count: Callable[[str], int]) -> float:
    return sum(_array_saving(records, count) for records in record_arrays(value))


def record_arrays(value: object) -> list[list[object]]:
    """The outermost arrays of at least MIN_RECORDS objects in `value` (uniformity is checked later)."""
    found: list[list[object]] = []
    pending: list[object] = [value]
    visited = 0
    while pending and visited < WALK_NODES and len(found) < MAX_ARRAYS:
        node = pending.pop()
        visited += 1
        if isinstance(node, dict):
            pending.extend(reversed(list(itertools.islice(node.values(), WALK_NODES))))
        elif isinstance(node, list):
            if len(node) >= MIN_RECORDS and isinstance(node[0], dict):
                found.append(node)
            else:
                pending.extend(reversed(node[:WALK_NODES]))
    return found


def _array_saving(records: Sequence[object], count: Callable[[str], int]) -> float:
    sample = _evenly_spaced(records, SAMPLE_RECORDS)
    keys = _shared_keys(sample)
    if keys is None:
        return 0.0
    rows = tabular(cast("list[Record]", sample), keys)  # _shared_keys saw every one is a dict
    saving = count(compact_json(sample)) - count(compact_json(rows))
    return max(0, saving) * len(records) / len(sample)


def tabular(records: Sequence[Record], keys: Sequence[str]) -> list[list[object]]:
    """The records as a header row of `keys` and one row of values per record."""
    return [list(keys), *([record[key] for key in keys] for record in records)]


def _shared_keys(records: Sequence[object]) -> list[str] | None:
    first = records[0] if records else None
    if not isinstance(first, dict) or len(first) < MIN_KEYS or len(records) < MIN_RECORDS:
        return None
    names = first.keys()
    if all(isinstance(record, dict) and record.keys() == names for record in records):
        return list(names)
    return None


def _evenly_spaced(items: Sequence[object], limit: int) -> list[object]:
    if len(items) <= limit:
        return list(items)
    step = len(items) / limit
    return [items[int(index * step)] for index in range(limit)]


def _large_text_saving(text: str, compact_tokens: int, count: Callable[[str], int]) -> float:
    """Saving of the first record array of a text too large to parse, from its leading records."""
    found = _ARRAY_OF_OBJECTS.search(text, 0, FULL_PARSE_CHARS)
    if found is None:
        return 0.0
    records = _leading_records(text, found.start() + 1)
    keys = _shared_keys(records)
    if keys is None:
        return 0.0
    as_records = count(compact_json(records))
    if as_records <= 0:
        return 0.0
    ratio = max(0, as_records - count(compact_json(tabular(records, keys)))) / as_records
    # The array runs from where it starts to (about) the end of the block.
    return compact_tokens * ratio * (len(text) - found.start()) / len(text)


def _leading_records(text: str, start: int) -> list[Record]:
    """Up to SAMPLE_RECORDS objects decoded one at a time from `start`, all within FULL_PARSE_CHARS
    (decoded from a slice, so one huge record cannot make this parse the whole block)."""
    window = text[start : start + FULL_PARSE_CHARS]
    records: list[Record] = []
    index = _SEPARATOR.match(window, 0).end()  # type: ignore[union-attr]  # matches the empty string
    while len(records) < SAMPLE_RECORDS and window.startswith("{", index):
        try:
            record, index = _DECODER.raw_decode(window, index)
        except (ValueError, RecursionError):
            break
        if not isinstance(record, dict):
            break
        records.append(record)
        index = _SEPARATOR.match(window, index).end()  # type: ignore[union-attr]
    return records
