"""How jobs and findings cross the pipes between the instrumented process and its helper.

Every message is a frame: a one-byte kind, a four-byte big-endian length, the body.

    instrumented process -> helper          helper -> instrumented process
    SETTINGS  pickled (Settings, Pacing)    READY     pickled AnalystStatus (once)
    JOB       pickled (Job, has_request,    FINDINGS  pickled Findings (one per job)
              has_response)
    PIECE     UTF-8 of a payload's JSON
    ASIDE     pickled path of a long string
    TEXT      UTF-8 of that string
    END       the payload is complete

A payload (the request's, then the response's, each when present) is its compact JSON
(`engine/compact.py`) with its long strings set aside: PIECE frames of about
`Pacing.piece_bytes`, then for each long string an ASIDE frame and TEXT frames, and an
END. Long strings (a tool result's text) go as their UTF-8, which costs a copy where JSON
escaping would cost more. Everything is encoded a piece at a time, so the sender
holds the GIL for one short step at a time and never a second copy of a large payload.
The helper parses the JSON, puts the long strings back in their places and has the same
values (lone surrogates survive as `surrogatepass` UTF-8).

Pickle is used only between a process and the helper it started itself, never on
anything a peer sent: payloads cross as JSON text.
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Any

from .engine.compact import Path, iter_compact_json
from .pacing import PACING

if TYPE_CHECKING:
    from .analyst import Job

HEADER = struct.Struct("!cI")
SETTINGS = b"S"
JOB = b"J"
PIECE = b"P"
ASIDE = b"A"
TEXT = b"T"
END = b"E"
READY = b"R"
FINDINGS = b"F"
_PICKLE_PROTOCOL = pickle.HIGHEST_PROTOCOL


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return HEADER.pack(kind, len(body)) + body


def message(kind: bytes, value: object) -> bytes:
    """A frame whose body is `value`, pickled."""
    return frame(kind, pickle.dumps(value, _PICKLE_PROTOCOL))


def job_frames(
    job: Job, request: object, response: object, piece_bytes: int = PACING.piece_bytes
) -> Iterator[bytes]:
    """The frames of one job, produced lazily: each step encodes one short piece (the C
    encoder is given at most `compact.STEP_CHARS` characters or 2048 values a step) and
    yields a frame when one is complete, else b"" (a step, and nothing to send yet)."""
    yield message(JOB, (job, request is not None, response is not None))
    for payload in (request, response):
        if payload is not None:
            yield from _payload_frames(payload, piece_bytes)


def _payload_frames(payload: object, piece_bytes: int) -> Iterator[bytes]:
    aside: list[tuple[Path, str]] = []
    pieces = (
        piece.encode("utf-8", "surrogatepass")
        for piece in iter_compact_json(payload, lambda path, text: aside.append((path, text)))
    )
    yield from _pieces(PIECE, pieces, piece_bytes)
    for path, text in aside:
        yield message(ASIDE, path)
        yield from _pieces(TEXT, _utf8_slices(text, piece_bytes), piece_bytes)
    yield frame(END)


def _pieces(kind: bytes, chunks: Iterator[bytes], piece_bytes: int) -> Iterator[bytes]:
    """Frames of `kind` holding the chunks, about `piece_bytes` each; b"" after a chunk
    that does not complete one."""
    pending: list[bytes] = []
    size = 0
    for data in chunks:
        pending.append(data)
        size += len(data)
        if size >= piece_bytes:
            yield frame(kind, b"".join(pending))
            pending, size = [], 0
        else:
            yield b""
    if pending:
        yield frame(kind, b"".join(pending))


def _utf8_slices(text: str, piece_bytes: int) -> Iterator[bytes]:
    # Characters per slice: at most piece_bytes of UTF-8 even when every one takes 4 bytes.
    step = max(1, piece_bytes // 4)
    for start in range(0, len(text), step):
        yield text[start : start + step].encode("utf-8", "surrogatepass")


def decode_payload(pieces: list[bytes]) -> Any:
    return json.loads(b"".join(pieces).decode("utf-8", "surrogatepass"))


class PayloadBuilder:
    """Puts a payload back together from its frames, on the helper's side."""

    def __init__(self) -> None:
        self._json: list[bytes] = []
        self._aside: list[tuple[Path, list[bytes]]] = []

    def add(self, kind: bytes, body: bytes) -> None:
        if kind == PIECE:
            self._json.append(body)
        elif kind == ASIDE:
            self._aside.append((pickle.loads(body), []))
        elif kind == TEXT and self._aside:
            self._aside[-1][1].append(body)
        else:
            raise ValueError(f"unexpected frame {kind!r} in a payload")

    def build(self) -> Any:
        """The payload; raises ValueError if the frames do not make one."""
        value = decode_payload(self._json)
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

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def frames(self) -> list[tuple[bytes, bytes]]:
        """The complete frames received so far (taken out of the buffer)."""
        buffer = self._buffer
        taken: list[tuple[bytes, bytes]] = []
        offset = 0
        while len(buffer) - offset >= HEADER.size:
            kind, length = HEADER.unpack_from(buffer, offset)
            end = offset + HEADER.size + length
            if len(buffer) < end:
                break
            taken.append((kind, bytes(buffer[offset + HEADER.size : end])))
            offset = end
        del buffer[:offset]
        return taken


def read_frame(stream: IO[bytes]) -> tuple[bytes, bytes] | None:
    """The next frame of a blocking stream; None at its end."""
    header = stream.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    kind, length = HEADER.unpack(header)
    body = stream.read(length) if length else b""
    if len(body) < length:
        return None
    return kind, body
