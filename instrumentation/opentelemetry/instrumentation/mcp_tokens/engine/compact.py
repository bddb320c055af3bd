# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Compact JSON of a parsed value, produced in steps that each hold the GIL briefly.

Where the analysis runs on a thread of the application (where no counting service can
run), it must leave the event loop the GIL often. `json.dumps` is C
code that keeps the GIL for the whole call: 7 ms for a 1 MB structuredContent, 150 ms
for 20 MB, during which the application's event loop cannot run. `compact_json` returns
exactly what `json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)`
returns, but hands the C encoder at most about `STEP_CHARS` characters at a time:

- a value whose bounded walk finds it small is encoded in one call (the common case);
- a list or dict is encoded in runs of consecutive elements that together stay under
  `STEP_CHARS`; an element that is larger on its own is descended into;
- a long string is escaped in slices (JSON escaping is per character, so the slices'
  escapes concatenate to the whole string's).

Anything other than plain str-keyed dicts, lists and strings (tuples, subclasses,
non-string keys) is left to the C encoder whole, which keeps the result identical to
json.dumps for every input.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

# Characters the C encoder is given per call: about 0.1 ms of encoding.
STEP_CHARS = 16 << 10
# How many nodes the size check visits before it calls a value large.
_STEP_NODES = 2048
# What the size check charges a number, a boolean or null, and each key's quotes and colon.
_SCALAR_CHARS = 8
_KEY_EXTRA_CHARS = 3

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def compact_json(value: object) -> str:
    """`json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)`, in steps."""
    if _size_within(value, STEP_CHARS) >= 0:
        return _ENCODER.encode(value)
    return "".join(_write(value))


def _size_within(value: object, budget: int) -> int:
    """Roughly how many characters `value` encodes to, or -1 once that exceeds `budget`.

    Visits at most `_STEP_NODES` nodes (and refuses longer containers before touching
    them), so it answers in bounded time for any value.
    """
    used = 0
    nodes = 0
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        node = pop()
        if type(node) is str:
            used += len(node) + 2
        elif type(node) is dict:
            nodes += len(node)
            if nodes > _STEP_NODES:
                return -1
            try:
                used += sum(map(len, node)) + (_KEY_EXTRA_CHARS + 1) * len(node)
            except TypeError:  # a key without a length: leave the value to the C encoder whole
                return -1
            extend(node.values())
        elif type(node) is list:
            nodes += len(node)
            if nodes > _STEP_NODES:
                return -1
            extend(node)
            used += len(node)
        else:
            used += _SCALAR_CHARS
        if used > budget:
            return -1
    return used


def _write(value: object) -> Iterator[str]:
    if type(value) is str:
        yield from _write_string(value)
    elif type(value) is list:
        yield from _write_list(value)
    elif type(value) is dict and all(type(key) is str for key in value):
        yield from _write_dict(value)
    else:
        yield _ENCODER.encode(value)


def _write_string(text: str) -> Iterator[str]:
    if len(text) <= STEP_CHARS:
        yield _ENCODER.encode(text)
        return
    yield '"'
    for start in range(0, len(text), STEP_CHARS):
        yield _ENCODER.encode(text[start : start + STEP_CHARS])[1:-1]
    yield '"'


def _write_list(items: list[object]) -> Iterator[str]:
    yield "["
    run: list[object] = []
    room = STEP_CHARS
    first = True
    for item in items:
        size = _size_within(item, STEP_CHARS)
        if 0 <= size <= room and len(run) < _STEP_NODES:
            run.append(item)
            room -= size + 1
            continue
        if run:
            yield _run_text(run, first)
            first = False
        if size >= 0:
            run, room = [item], STEP_CHARS - size - 1
        else:  # larger than a step on its own: descend
            if not first:
                yield ","
            first = False
            yield from _write(item)
            run, room = [], STEP_CHARS
    if run:
        yield _run_text(run, first)
    yield "]"


def _write_dict(mapping: dict[str, object]) -> Iterator[str]:
    yield "{"
    run: dict[str, object] = {}
    room = STEP_CHARS
    first = True
    for key, value in mapping.items():
        size = _size_within(value, STEP_CHARS)
        if size >= 0:
            size += len(key) + _KEY_EXTRA_CHARS
        if 0 <= size <= room and len(run) < _STEP_NODES:
            run[key] = value
            room -= size + 1
            continue
        if run:
            yield _run_text(run, first)
            first = False
        if size >= 0:
            run, room = {key: value}, STEP_CHARS - size - 1
        else:  # larger than a step on its own: descend
            yield ("" if first else ",") + _ENCODER.encode(key) + ":"
            first = False
            yield from _write(value)
            run, room = {}, STEP_CHARS
    if run:
        yield _run_text(run, first)
    yield "}"


def _run_text(run: list[object] | dict[str, object], first: bool) -> str:
    """A run of elements encoded as one step (without its brackets), after a separator
    unless it comes first."""
    text = _ENCODER.encode(run)[1:-1]
    return text if first else "," + text
