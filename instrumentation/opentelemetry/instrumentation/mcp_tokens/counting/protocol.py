# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What crosses the counting service's sockets, and how.

Every message is a frame: a one-byte kind, a four-byte big-endian length, the body.

    client -> service                           service -> client
    HELLO   the client's Settings               READY     pickled AnalystStatus (once)
    JOB     a Job, then its (request,           FINDINGS  pickled Findings (one per job)
            response) as PIECE frames and an
            END
    GUARD   (guard socket) {op, budget} as      ANSWER    (guard socket) the answer, as JSON
            JSON, then the text's UTF-8 as
            PIECE frames and an END

A payload crosses as one pickle of plain values (dicts, lists, strings, numbers, booleans,
None), made by C code in one call: a tenth of what JSON costs, lone surrogates included.
A payload holding anything else crosses as its JSON form (what `json.dumps` writes). The
pickle is cut into PIECE frames of `piece_bytes`, sent as slices of it, never copied.

The service unpickles nothing but plain values and the few classes of `_ALLOWED`: HELLO
and JOB bodies go through `loads_plain`, payloads through `loads_values`, which refuses
every class (a pickle that names none can only build values). Findings travel the other
way as pickles, which a client reads only from a service it has checked runs as its user.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.analyst import Job

HEADER = struct.Struct("!cI")
HELLO = b"H"
JOB = b"J"
PIECE = b"P"
END = b"E"
READY = b"R"
FINDINGS = b"F"
GUARD = b"G"
ANSWER = b"N"
# A frame body larger than this is not ours: the connection is dropped.
MAX_FRAME = 64 << 20

_PROTOCOL = pickle.HIGHEST_PROTOCOL
# The classes a HELLO or JOB may hold (module, name), and nothing else.
_ALLOWED = frozenset(
    {
        ("opentelemetry.instrumentation.mcp_tokens.config", "Settings"),
        ("opentelemetry.instrumentation.mcp_tokens.analyst", "Job"),
        ("opentelemetry.instrumentation.mcp_tokens.engine.analysis", "PayloadKind"),
        ("opentelemetry.instrumentation.mcp_tokens.engine.images", "ImageModel"),
        ("opentelemetry.instrumentation.mcp_tokens.engine.risk", "RiskThresholds"),
        ("opentelemetry.instrumentation.mcp_tokens.engine.ledger", "BudgetThresholds"),
        ("re", "_compile"),
        ("copyreg", "_reconstructor"),
        ("builtins", "object"),
    }
)


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(body)) + body


def message(kind: bytes, value: object) -> bytes:
    """A frame whose body is `value`, pickled."""
    return frame(kind, pickle.dumps(value, _PROTOCOL))


def pieces(data: bytes | memoryview, piece_bytes: int) -> Iterator[bytes | memoryview]:
    """`data` as PIECE frames (each a header and a slice of `data`), then an END."""
    view = memoryview(data)
    for start in range(0, len(view), piece_bytes):
        piece = view[start : start + piece_bytes]
        yield HEADER.pack(PIECE, len(piece))
        yield piece
    yield frame(END)


class _Refusing(pickle.Unpickler):
    allowed: frozenset[tuple[str, str]] = frozenset()

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.allowed:
            raise pickle.UnpicklingError(f"{module}.{name} may not cross to the counting service")
        return super().find_class(module, name)


class _PlainUnpickler(_Refusing):
    allowed = _ALLOWED


def loads_plain(body: bytes) -> Any:
    """Unpickle a client's HELLO or JOB body: plain values and `_ALLOWED` classes only."""
    return _PlainUnpickler(io.BytesIO(body)).load()


def loads_values(body: bytes) -> Any:
    """Unpickle a payload: dicts, lists, tuples, strings, numbers, booleans and None."""
    return _Refusing(io.BytesIO(body)).load()


class _ValuesPickler(pickle.Pickler):
    # Called for every object but None, booleans, and instances of int, float, bytes, str,
    # dict, set, frozenset, list and tuple (which pickle writes itself): refuse them all.
    def reducer_override(self, obj: Any) -> Any:
        raise TypeError(f"not a plain value: {type(obj).__name__}")


def dumps_values(payload: object) -> memoryview:
    """`payload` as one pickle of plain values (its JSON form if it holds anything else).
    Raises ValueError for a payload neither can write (a cycle)."""
    try:
        return _pickled(payload)
    except (TypeError, ValueError, RecursionError, pickle.PicklingError):
        pass
    try:
        return _pickled(json.loads(json.dumps(payload, ensure_ascii=False, default=str)))
    except (TypeError, ValueError, RecursionError, pickle.PicklingError) as exc:
        raise ValueError(f"a payload that cannot cross: {exc}") from None


def _pickled(value: object) -> memoryview:
    out = io.BytesIO()
    pickler = _ValuesPickler(out, _PROTOCOL)
    # No memo: twice as fast on payloads of many small values (JSON has no shared objects).
    pickler.fast = True
    pickler.dump(value)
    return out.getbuffer()


def job_frames(job: Job, request: object, response: object, piece_bytes: int) -> Iterator[bytes | memoryview]:
    """The frames of one job: its JOB frame, then (request, response) as PIECE frames and an
    END (an empty payload, which the service fails to analyse, if they cannot cross)."""
    yield message(JOB, job)
    try:
        data: bytes | memoryview = dumps_values((request, response))
    except ValueError:
        data = b""
    yield from pieces(data, piece_bytes)


class PayloadBuilder:
    """Puts a payload back together from its PIECE frames and END (service side)."""

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        self.size = 0
        self.done = False

    def add(self, kind: bytes, body: bytes) -> bool:
        """Take one frame; True when it completed the payload."""
        if self.done or kind not in (PIECE, END):
            raise ValueError(f"unexpected frame {kind!r} in a payload")
        if kind == END:
            self.done = True
        else:
            self._pieces.append(body)
            self.size += len(body)
        return self.done

    def build(self) -> Any:
        """The payload; raises ValueError, EOFError or UnpicklingError if it is not one."""
        return loads_values(b"".join(self._pieces))


class FrameReader:
    """Frames out of bytes that arrive in arbitrary slices (non-blocking reads)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._start = 0  # where the next frame begins: consumed bytes go in bulk

    def __len__(self) -> int:
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        if self._start:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> tuple[bytes, bytes] | None:
        """The next complete frame; None until one is complete. Raises ValueError for a
        frame no client of ours sends."""
        buffer, start = self._buffer, self._start
        if len(buffer) - start < HEADER.size:
            return None
        kind, length = HEADER.unpack_from(buffer, start)
        if length > MAX_FRAME:
            raise ValueError(f"a frame of {length} bytes")
        end = start + HEADER.size + length
        if len(buffer) < end:
            return None
        self._start = end
        return kind, bytes(buffer[start + HEADER.size : end])

    def frames(self) -> Iterator[tuple[bytes, bytes]]:
        while (found := self.next_frame()) is not None:
            yield found
