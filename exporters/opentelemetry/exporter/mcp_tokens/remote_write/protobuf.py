# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The remote-write 1.0 `WriteRequest` in protobuf wire format, written by hand (five small
messages, from prometheus/prompb `remote.proto` and `types.proto`):

    WriteRequest   { repeated TimeSeries timeseries = 1; repeated MetricMetadata metadata = 3; }
    TimeSeries     { repeated Label labels = 1; repeated Sample samples = 2; }
    Label          { string name = 1; string value = 2; }
    Sample         { double value = 1; int64 timestamp = 2; }    // milliseconds since the epoch
    MetricMetadata { MetricType type = 1; string metric_family_name = 2; string help = 4;
                     string unit = 5; }

A field is its key (`number << 3 | wire type`: 0 varint, 1 fixed 64 bits, 2 length-delimited)
then its value.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

_DOUBLE = struct.Struct("<d")

# prompb MetricMetadata.MetricType, by Prometheus family type.
METRIC_TYPES = {"counter": 1, "gauge": 2, "histogram": 3, "summary": 5, "info": 6, "stateset": 7}


class Series(NamedTuple):
    labels: Sequence[tuple[str, str]]  # sorted by name, `__name__` included
    value: float
    timestamp_ms: int


class Metadata(NamedTuple):
    family: str
    type: str
    help: str
    unit: str


def varint(value: int) -> bytes:
    """Base-128 varint, low groups first (protobuf's, and snappy's length prefix)."""
    value &= (1 << 64) - 1  # negative int64 values are ten bytes, two's complement
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _text(number: int, text: str) -> bytes:
    return _field(number, text.encode("utf-8", "replace"))


def _series(series: Series) -> bytes:
    parts = [_field(1, _text(1, name) + _text(2, value)) for name, value in series.labels]
    sample = b"\x09" + _DOUBLE.pack(series.value) + b"\x10" + varint(series.timestamp_ms)
    parts.append(_field(2, sample))
    return b"".join(parts)


def _metadata(metadata: Metadata) -> bytes:
    kind = METRIC_TYPES.get(metadata.type, 0)
    body = b"\x08" + varint(kind) + _text(2, metadata.family)
    if metadata.help:
        body += _text(4, metadata.help)
    if metadata.unit:
        body += _text(5, metadata.unit)
    return body


def write_request(series: Iterable[Series], metadata: Iterable[Metadata] = ()) -> bytes:
    parts = [_field(1, _series(one)) for one in series]
    parts.extend(_field(3, _metadata(one)) for one in metadata)
    return b"".join(parts)
