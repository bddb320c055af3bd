# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The frames between the instrumented process and its helper (channel.py)."""

from __future__ import annotations

import io
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens import channel
from opentelemetry.instrumentation.mcp_tokens.analyst import Job
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing

PIECE_BYTES = Pacing().piece_bytes

JOB = Job(
    seq=7,
    side="client",
    method="tools/call",
    target="search",
    server_name="crm",
    error_type=None,
    end_ns=123,
    request_kind=PayloadKind.TOOL_ARGUMENTS,
    response_kind=PayloadKind.TOOL_RESULT,
    budget_key="conversation-1",
    context_window=128_000,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def read_all(data: bytes) -> list[tuple[bytes, bytes]]:
    stream = io.BytesIO(data)
    frames = []
    while (frame := channel.read_frame(stream)) is not None:
        frames.append(frame)
    return frames


def parse_job(frames: list[tuple[bytes, bytes]]) -> tuple[Job, list[object]]:
    kind, body = frames[0]
    assert kind == channel.JOB
    job, has_request, has_response = pickle.loads(body)
    payloads: list[object] = []
    builder = channel.PayloadBuilder()
    for kind, body in frames[1:]:
        if kind == channel.END:
            payloads.append(builder.build())
            builder = channel.PayloadBuilder()
        else:
            builder.add(kind, body)
    assert len(payloads) == has_request + has_response
    return job, payloads


@settings(max_examples=200, deadline=None)
@given(request=json_values, response=json_values)
def test_payloads_cross_as_the_same_values(request: object, response: object) -> None:
    job, payloads = parse_job(read_all(b"".join(channel.job_frames(JOB, request, response))))
    assert job == JOB
    expected = [p for p in (request, response) if p is not None]
    assert payloads == expected


def test_lone_surrogates_and_astral_characters_survive() -> None:
    text = "a\ud800b\udfffc\U0001f600" + "\ud83d" + "\ude00"  # the last two stay two code points
    _, payloads = parse_job(read_all(b"".join(channel.job_frames(JOB, None, {"text": text}))))
    assert payloads == [{"text": text}]
    assert len(payloads[0]["text"]) == len(text)  # type: ignore[index]


def test_long_strings_go_aside_as_utf8_and_come_back_in_their_places() -> None:
    long_text = '"quoted" \\ and \u00e9\ud800 ' * 3_000
    payload = {
        "content": [{"type": "text", "text": long_text}, {"type": "text", "text": "short"}],
        "structuredContent": {"rows": [long_text, {"deep": [1, long_text]}], "n": 3},
    }
    frames = read_all(b"".join(channel.job_frames(JOB, None, payload)))
    kinds = [kind for kind, _ in frames]
    assert kinds.count(channel.ASIDE) == 3
    texts = b"".join(body for kind, body in frames if kind == channel.TEXT)
    assert texts == (long_text * 3).encode("utf-8", "surrogatepass")  # as is: not JSON-escaped
    assert parse_job(frames)[1] == [payload]
    # A payload that is one long string.
    assert parse_job(read_all(b"".join(channel.job_frames(JOB, None, long_text))))[1] == [long_text]


def test_a_large_payload_is_cut_into_bounded_pieces() -> None:
    text = "0123456789" * 200_000  # 2 MB
    frames = read_all(
        b"".join(channel.job_frames(JOB, {"q": "x"}, {"content": [{"type": "text", "text": text}]}))
    )
    pieces = [body for kind, body in frames if kind in (channel.PIECE, channel.TEXT)]
    assert len(pieces) >= 2_000_000 // PIECE_BYTES
    assert max(len(piece) for piece in pieces) < PIECE_BYTES + (32 << 10)
    _, payloads = parse_job(frames)
    assert payloads[1] == {"content": [{"type": "text", "text": text}]}


def test_frames_are_read_back_whatever_the_slices_they_arrive_in() -> None:
    data = b"".join(channel.job_frames(JOB, {"a": 1}, {"b": "x" * 1000})) + channel.message(
        channel.READY, "r"
    )
    expected = read_all(data)
    for size in (1, 7, 4096):
        reader = channel.FrameReader()
        got: list[tuple[bytes, bytes]] = []
        for start in range(0, len(data), size):
            reader.feed(data[start : start + size])
            got.extend(reader.frames())
        assert got == expected


def test_a_truncated_stream_ends_without_a_frame() -> None:
    data = channel.message(channel.READY, {"x": 1})
    assert channel.read_frame(io.BytesIO(data[:-1])) is None
    assert channel.read_frame(io.BytesIO(data[:3])) is None


def test_decoding_something_that_is_not_json_raises_a_value_error() -> None:
    with pytest.raises(ValueError):
        channel.decode_payload([b"{not json"])
    assert channel.decode_payload([json.dumps({"k": [1, 2]}).encode()]) == {"k": [1, 2]}


def test_the_piece_size_is_the_pacings() -> None:
    text = "0123456789" * 10_000
    frames = read_all(b"".join(channel.job_frames(JOB, None, {"text": text}, piece_bytes=4096)))
    pieces = [body for kind, body in frames if kind in (channel.PIECE, channel.TEXT)]
    assert len(pieces) >= len(text) // (2 * 4096)
    assert max(len(piece) for piece in pieces) <= 2 * 4096
    assert parse_job(frames)[1] == [{"text": text}]
