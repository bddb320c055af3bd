# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What crosses the counting service's sockets, and how.

Every message is a frame: a one-byte kind, a four-byte big-endian length, the body.

    client -> service                            service -> client
    HELLO  the client's Settings (see below)     READY     pickled AnalystStatus (once)
    JOB    a Job, then its payloads:             FINDINGS  pickled Findings (one per job)
      PIECE  UTF-8 of a payload's JSON
      ASIDE  the path of a long string           (guard socket)
      TEXT   UTF-8 of that string                GUARD     {op, budget} as JSON, then TEXT
      END    the payload is complete                       frames and END: the text
                                                 ANSWER    the answer, as JSON

A payload (the request's, then the response's, each when present) is its compact JSON
(engine/compact.py) with its long strings set aside, so that a tool result's text crosses
as its UTF-8 (a copy) rather than JSON-escaped, and the sender encodes one short step at a
time and never holds a second copy of a large payload. Lone surrogates survive as
`surrogatepass` UTF-8.

The service never unpickles anything but the few plain classes of `_ALLOWED`: HELLO, JOB
and ASIDE bodies go through `loads_plain`. Findings travel the other way as pickles, which
a client reads only from a service it has checked runs as its own user.
"""

from __future__ import annotations

import io
import json
import pickle
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from opentelemetry.instrumentation.mcp_tokens.engine.compact import Path, iter_compact_json

if TYPE_CHECKING:
    from opentelemetry.instrumentation.mcp_tokens.analyst import Job

HEADER = struct.Struct("!cI")
HELLO = b"H"
JOB = b"J"
PIECE = b"P"
ASIDE = b"A"
TEXT = b"T"
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
        ("builtins", "tuple"),
        ("builtins", "frozenset"),
    }
)


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(body)) + body


def message(kind: bytes, value: object) -> bytes:
    """A frame whose body is `value`, pickled."""
    return frame(kind, pickle.dumps(value, _PROTOCOL))


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} may not cross to the counting service")
        return super().find_class(module, name)


def loads_plain(body: bytes) -> Any:
    """Unpickle a client's HELLO, JOB or ASIDE body: plain values and `_ALLOWED` classes only."""
    return _PlainUnpickler(io.BytesIO(body)).load()


def job_frames(job: Job, request: object, response: object, piece_bytes: int) -> Iterator[bytes]:
    """The frames of one job, produced lazily: each step encodes one short piece and yields
    a frame when one is complete, else b"" (a step, nothing to send yet)."""
    yield message(JOB, (job, request is not None, response is not None))
    for payload in (request, response):
        if payload is not None:
            yield from _payload_frames(payload, piece_bytes)


def text_frames(text: str, piece_bytes: int) -> Iterator[bytes]:
    """A text as TEXT frames of at most `piece_bytes`, then END."""
    step = max(1, piece_bytes // 4)  # at most piece_bytes even if every character takes 4
    for start in range(0, len(text), step):
        yield frame(TEXT, text[start : start + step].encode("utf-8", "surrogatepass"))
    yield frame(END)


def _payload_frames(payload: object, piece_bytes: int) -> Iterator[bytes]:
    aside: list[tuple[Path, str]] = []
    pending: list[bytes] = []
    size = 0
    for piece in iter_compact_json(payload, lambda path, text: aside.append((path, text))):
        data = piece.encode("utf-8", "surrogatepass")
        pending.append(data)
        size += len(data)
        if size >= piece_bytes:
            yield frame(PIECE, b"".join(pending))
            pending, size = [], 0
        else:
            yield b""
    if pending:
        yield frame(PIECE, b"".join(pending))
    for path, text in aside:
        yield message(ASIDE, path)
        yield from text_frames(text, piece_bytes)
    yield frame(END)


class PayloadBuilder:
    """Puts a payload back together from its frames (service side): PIECE frames, then for
    each long string an ASIDE, its TEXT frames and an END, then the payload's END."""

    def __init__(self) -> None:
        self._json: list[bytes] = []
        self._aside: list[tuple[Path, list[bytes]]] = []
        self._in_text = False
        self.done = False

    def add(self, kind: bytes, body: bytes) -> bool:
        """Take one frame; True when it completed the payload."""
        if self.done:
            raise ValueError("a frame after the payload's end")
        if kind == END:
            if self._in_text:
                self._in_text = False
                return False
            self.done = True
            return True
        if kind == PIECE and not self._aside:
            self._json.append(body)
        elif kind == ASIDE and not self._in_text:
            self._aside.append((loads_plain(body), []))
            self._in_text = True
        elif kind == TEXT and self._in_text:
            self._aside[-1][1].append(body)
        else:
            raise ValueError(f"unexpected frame {kind!r} in a payload")
        return False

    def build(self) -> Any:
        """The payload; raises ValueError if the frames do not make one."""
        value = json.loads(b"".join(self._json).decode("utf-8", "surrogatepass"))
        for path, chunks in self._aside:
            text = b"".join(chunks).decode("utf-8", "surrogatepass")
            if not path:
                value = text
                continue
            try:
                container = value
                for step in path[:-1]:
                    container = container[step]
                container[path[-1]] = text
            except (KeyError, IndexError, TypeError) as exc:
                raise ValueError(f"no place for a long string at {path!r}") from exc
        return value


class FrameReader:
    """Frames out of bytes that arrive in arbitrary slices (non-blocking reads)."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def __len__(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def next_frame(self) -> tuple[bytes, bytes] | None:
        """The next complete frame, taken out of the buffer; None until one is complete.
        Raises ValueError for a frame no client of ours sends."""
        buffer = self._buffer
        if len(buffer) < HEADER.size:
            return None
        kind, length = HEADER.unpack_from(buffer)
        if length > MAX_FRAME:
            raise ValueError(f"a frame of {length} bytes")
        end = HEADER.size + length
        if len(buffer) < end:
            return None
        body = bytes(buffer[HEADER.size : end])
        del buffer[:end]
        return kind, body

    def frames(self) -> Iterator[tuple[bytes, bytes]]:
        while (found := self.next_frame()) is not None:
            yield found
