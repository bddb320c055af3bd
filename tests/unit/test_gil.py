# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Handing the GIL over while our threads run Python (gil.py)."""

from __future__ import annotations

import sys

import pytest
from opentelemetry.instrumentation.mcp_tokens import gil
from opentelemetry.instrumentation.mcp_tokens.gil import needs_slicing, sliced, yield_gil
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(gil.time, "sleep", slept.append)
    return slept


def test_yield_gil_pauses_once_a_slice_is_spent(pauses: list[float]) -> None:
    long_slice = Pacing(slice_s=60.0, yield_s=0.001)
    yield_gil(Pacing(slice_s=0.0, yield_s=0.001))
    assert pauses == [0.001]
    yield_gil(long_slice)  # just paused: the slice is not spent
    assert pauses == [0.001]


def test_sliced_pauses_inside_python_and_removes_its_hook(pauses: list[float]) -> None:
    with sliced(Pacing(slice_s=0.0)):
        for value in range(10):
            len(repr(value))  # a call of a built-in: an event the profile hook sees
    assert len(pauses) >= 10
    assert sys.getprofile() is None


def test_sliced_keeps_a_profile_hook_someone_else_set() -> None:
    def theirs(frame: object, event: str, arg: object) -> None:
        return None

    sys.setprofile(theirs)
    try:
        with sliced():
            assert sys.getprofile() is theirs
        assert sys.getprofile() is theirs
    finally:
        sys.setprofile(None)


def test_payloads_need_slicing_by_characters_or_by_values() -> None:
    pacing = Pacing(slice_from_chars=1000, slice_from_nodes=50)
    long_text = {"content": [{"type": "text", "text": "w" * 1000}]}
    many_values = {"rows": list(range(100))}
    assert not needs_slicing(None, {"content": []}, pacing)
    assert needs_slicing(None, long_text, pacing)
    assert not needs_slicing(None, long_text, pacing, by_chars=False)  # long strings cross whole
    assert needs_slicing(many_values, None, pacing, by_chars=False)
