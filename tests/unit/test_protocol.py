# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The frames between an instrumented process and its counting service (counting/protocol.py)."""

from __future__ import annotations

import pickle
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.analyst import Job
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting import protocol
from opentelemetry.instrumentation.mcp_tokens.counting.options import Options
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel

PIECE_BYTES = Options().piece_bytes

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
    behind=True,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=30,
)


def read_all(data: bytes) -> list[tuple[bytes, bytes]]:
    reader = protocol.FrameReader()
    reader.feed(data)
    frames = list(reader.frames())
    assert len(reader) == 0
    return frames


def encode(request: object, response: object, piece_bytes: int = PIECE_BYTES) -> bytes:
    return b"".join(protocol.job_frames(JOB, request, response, piece_bytes))


def parse_job(frames: list[tuple[bytes, bytes]]) -> tuple[Job, list[object]]:
    """The job and its payloads that are present (request first)."""
    kind, body = frames[0]
    assert kind == protocol.JOB
    builder = protocol.PayloadBuilder()
    for kind, body in frames[1:]:
        assert not builder.add(kind, body) or kind == protocol.END
    assert builder.done
    request, response = builder.build()
    return protocol.loads_plain(frames[0][1]), [p for p in (request, response) if p is not None]


@settings(max_examples=200, deadline=None)
@given(request=json_values, response=json_values)
def test_payloads_cross_as_the_same_values(request: object, response: object) -> None:
    job, payloads = parse_job(read_all(encode(request, response)))
    assert job == JOB
    assert payloads == [p for p in (request, response) if p is not None]


def test_lone_surrogates_and_astral_characters_survive() -> None:
    text = "a\ud800b\udfffc\U0001f600" + "\ud83d" + "\ude00"  # the last two stay two code points
    _, payloads = parse_job(read_all(encode(None, {"text": text})))
    assert payloads == [{"text": text}]
    assert len(payloads[0]["text"]) == len(text)  # type: ignore[index]


def test_a_payload_of_anything_else_crosses_as_its_json() -> None:
    class Named(str):
        pass

    odd = {"content": [{"type": "text", "text": Named("a str subclass")}], "when": Fraction(1, 3)}
    _, payloads = parse_job(read_all(encode({"q": ("a", "tuple")}, odd)))
    assert payloads == [
        {"q": ["a", "tuple"]},
        {"content": [{"type": "text", "text": "a str subclass"}], "when": "1/3"},
    ]
    cyclic: list[object] = []
    cyclic.append(cyclic)
    frames = read_all(encode(None, cyclic))  # cannot cross: an empty payload, which fails to build
    assert [kind for kind, _ in frames] == [protocol.JOB, protocol.END]


def test_a_large_payload_is_cut_into_bounded_pieces_without_copies() -> None:
    text = "0123456789" * 200_000  # 2 MB
    frames = read_all(encode({"q": "x"}, {"content": [{"type": "text", "text": text}]}))
    pieces = [body for kind, body in frames if kind == protocol.PIECE]
    assert len(pieces) >= 2_000_000 // PIECE_BYTES
    assert max(len(piece) for piece in pieces) <= PIECE_BYTES
    assert parse_job(frames)[1][1] == {"content": [{"type": "text", "text": text}]}
    sent = list(protocol.job_frames(JOB, None, {"text": text}, 4096))
    assert sum(isinstance(part, memoryview) for part in sent) >= len(text) // 4096  # slices of one pickle


def test_frames_are_read_back_whatever_the_slices_they_arrive_in() -> None:
    data = encode({"a": 1}, {"b": "x" * 1000}) + protocol.message(protocol.READY, "r")
    expected = read_all(data)
    for size in (1, 7, 4096):
        reader = protocol.FrameReader()
        got: list[tuple[bytes, bytes]] = []
        for start in range(0, len(data), size):
            reader.feed(data[start : start + size])
            got.extend(reader.frames())
        assert got == expected


def test_a_frame_larger_than_any_client_sends_is_refused() -> None:
    reader = protocol.FrameReader()
    reader.feed(protocol.HEADER.pack(protocol.PIECE, protocol.MAX_FRAME + 1))
    with pytest.raises(ValueError):
        reader.next_frame()


def test_frames_out_of_order_do_not_make_a_payload() -> None:
    builder = protocol.PayloadBuilder()
    with pytest.raises(ValueError):
        builder.add(protocol.JOB, b"")
    done = protocol.PayloadBuilder()
    assert done.add(protocol.PIECE, pickle.dumps({})) is False and done.add(protocol.END, b"") is True
    with pytest.raises(ValueError):
        done.add(protocol.PIECE, b"")
    broken = protocol.PayloadBuilder()
    broken.add(protocol.PIECE, b"not a pickle")
    broken.add(protocol.END, b"")
    with pytest.raises((ValueError, EOFError, pickle.UnpicklingError)):
        broken.build()


def test_a_payload_that_names_a_class_is_refused() -> None:
    builder = protocol.PayloadBuilder()
    builder.add(protocol.PIECE, pickle.dumps({"when": Options()}))
    assert builder.add(protocol.END, b"")
    with pytest.raises(pickle.UnpicklingError):
        builder.build()


def test_the_service_unpickles_settings_and_jobs_and_nothing_else() -> None:
    settings_value = Settings(
        image_model=ImageModel.OPENAI, overhead_pattern=re.compile("x+"), guard_tool_limits=(("a", 1),)
    )
    assert protocol.loads_plain(pickle.dumps(settings_value)) == settings_value
    assert protocol.loads_plain(pickle.dumps(JOB)) == JOB

    class Payload:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("this would run in the service",))

    for hostile in (pickle.dumps(Payload()), pickle.dumps(__import__("os").getcwd), pickle.dumps(Options())):
        with pytest.raises(pickle.UnpicklingError):
            protocol.loads_plain(hostile)
