# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Snappy's block format (what remote write's `Content-Encoding: snappy` means), encoding only.

The format (google/snappy, format_description.txt): the uncompressed length as a varint, then
elements. A literal is a tag byte `(length - 1) << 2` (lengths up to 60; longer ones put
`59 + n` in the tag and the length - 1 in the next n little-endian bytes) followed by the bytes;
a copy repeats `length` bytes from `offset` bytes back: tag `(length - 1) << 2 | 2` and a
2-byte little-endian offset (lengths 1-64, offsets up to 65535).

Matches are found as the reference encoder finds them: a table of the last position of each
4-byte sequence, looked up at every position, stepping faster through data that keeps
failing to match. A remote-write request repeats the same label names and values in every
series, so most of it is copies and the Python loop runs once per match, not per byte. The
output is valid for any decoder; only the ratio differs from the C++ encoder's.
"""

from __future__ import annotations

from .protobuf import varint

_MAX_OFFSET = 65535
_MAX_COPY = 64
_MIN_MATCH = 4
# Every 32 failed lookups in a row, step one byte further (as the reference encoder does).
_SKIP_SHIFT = 5


def _literal(out: bytearray, data: bytes, start: int, end: int) -> None:
    while start < end:
        # Long literals are split at 2**16 bytes, so the length always fits two bytes.
        length = min(end - start, 1 << 16)
        if length <= 60:
            out.append((length - 1) << 2)
        elif length <= 256:
            out.append(60 << 2)
            out.append(length - 1)
        else:
            out.append(61 << 2)
            out += (length - 1).to_bytes(2, "little")
        out += data[start : start + length]
        start += length


def _copy(out: bytearray, offset: int, length: int) -> None:
    while length > 0:
        # Leave at least 4 for the last piece, since a copy shorter than that is wasteful.
        piece = min(length, _MAX_COPY) if length - _MAX_COPY >= _MIN_MATCH or length <= _MAX_COPY else 60
        out.append(((piece - 1) << 2) | 2)
        out += offset.to_bytes(2, "little")
        length -= piece


def compress(data: bytes) -> bytes:
    """`data` in snappy's block format."""
    out = bytearray(varint(len(data)))
    size = len(data)
    table: dict[bytes, int] = {}
    literal_start = 0
    position = 0
    misses = 0
    limit = size - _MIN_MATCH
    while position <= limit:
        key = data[position : position + _MIN_MATCH]
        candidate = table.get(key)
        table[key] = position
        if candidate is None or position - candidate > _MAX_OFFSET:
            misses += 1
            position += 1 + (misses >> _SKIP_SHIFT)
            continue
        misses = 0
        length = _match_length(data, candidate, position)
        _literal(out, data, literal_start, position)
        _copy(out, position - candidate, length)
        position += length
        literal_start = position
    _literal(out, data, literal_start, size)
    return bytes(out)


def _match_length(data: bytes, earlier: int, position: int) -> int:
    """How many bytes from `position` repeat those from `earlier` (at least 4), found by
    comparing ever longer slices instead of byte by byte."""
    length = _MIN_MATCH
    step = 16
    end = len(data)
    while position + length < end:
        span = min(step, end - position - length)
        here, there = position + length, earlier + length
        if data[there : there + span] == data[here : here + span]:
            length += span
            step *= 2
            continue
        if span == 1:
            break
        step = max(1, span // 2)
    return length
