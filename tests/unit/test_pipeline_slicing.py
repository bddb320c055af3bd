# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Which work runs with the worker's pauses inside it (`sliced`), and which does not.

The pauses come from a profile hook of the thread, which makes the interpreter run
slower; a light exchange is analysed in well under 1 ms and goes without it, a heavy one
(by characters, or by values for a listing of tiny tools) with it, when the analysis
runs on a thread of this process. Encoding for the helper process needs no hook: it goes
a bounded frame per step.
"""

from __future__ import annotations

import sys

import pytest
from opentelemetry.instrumentation.mcp_tokens import channel
from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, job_of
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine import compact
from opentelemetry.instrumentation.mcp_tokens.engine.analysis import Analysis, Analyzer, PayloadKind
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import payload_weight
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange, Side
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing
from opentelemetry.instrumentation.mcp_tokens.thread_link import ThreadLink

PACING = Pacing()


def _text(chars: int) -> dict[str, object]:
    return {"content": [{"type": "text", "text": "w" * chars}]}


def _blocks(count: int) -> dict[str, object]:
    return {"content": [{"type": "text", "text": str(index % 10)} for index in range(count)]}


def _tools(count: int) -> dict[str, object]:
    return {"tools": [{"name": f"t{index}", "inputSchema": {"type": "object"}} for index in range(count)]}


CASES = [
    ("tools/call", _text(1_000), False),
    ("tools/call", _text(PACING.slice_from_chars), True),
    ("tools/call", _blocks(3), False),
    ("tools/call", _blocks(PACING.slice_from_nodes), True),
    ("tools/list", _tools(2), False),
    ("tools/list", _tools(2_000), True),
]
IDS = ["1k-text", "long-text", "few-blocks", "many-blocks", "small-listing", "listing-of-tiny-tools"]


def _exchange(method: str, response: dict[str, object]) -> Exchange:
    exchange = Exchange(Side.CLIENT, method, target="t" if method == "tools/call" else None)
    exchange.request = {"name": "t", "arguments": {}} if method == "tools/call" else None
    exchange.finish(response)
    return exchange


@pytest.mark.parametrize(
    "payload",
    [_text(20_000_000), _blocks(200_000), _tools(20_000), {"rows": [[i, str(i)] for i in range(300_000)]}],
    ids=["20-MB-text", "many-blocks", "listing-of-tiny-tools", "many-small-values"],
)
def test_sending_goes_in_frames_of_bounded_size_whatever_the_payload(payload: dict[str, object]) -> None:
    """The worker takes one frame per step and checks its budget between steps, so a frame
    (the JSON a step encodes) must stay small however many values or characters there are."""
    exchange = _exchange("tools/call", payload)
    job = job_of(exchange, 1)
    sizes = [len(frame) for frame in channel.job_frames(job, exchange.request, exchange.response)]
    assert max(sizes) <= PACING.piece_bytes + compact.STEP_CHARS * 4 + channel.HEADER.size
    assert len(sizes) > 4


@pytest.mark.parametrize(("method", "response", "hooked"), CASES, ids=IDS)
def test_heavy_exchanges_are_analysed_sliced_on_the_thread_link(
    method: str, response: dict[str, object], hooked: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[object] = []
    analyze = Analyzer.analyze

    def watching(self: Analyzer, kind: PayloadKind, payload: object) -> Analysis:
        seen.append(sys.getprofile())
        return analyze(self, kind, payload)

    monkeypatch.setattr(Analyzer, "analyze", watching)
    link = ThreadLink(Settings())
    try:
        assert all(step is True for step in link.sender(_exchange(method, response), 1, False))
        assert [findings.seq for findings in link.receive()] == [1]
    finally:
        link.close()
    assert seen, "the exchange was not analysed"
    assert all((hook is not None) is hooked for hook in seen)
    assert sys.getprofile() is None


def test_the_analysis_on_a_thread_pauses_between_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[int] = []
    analyst = Analyst(Settings(), pause=lambda: pauses.append(1))
    exchange = _exchange("tools/call", _text(100))
    analyst.analyse(job_of(exchange, 1), exchange.request, exchange.response)
    assert len(pauses) >= 2


@pytest.mark.parametrize("count", [20, 3_000, 50_000])
def test_weight_counts_the_values_of_a_payload_within_a_factor(count: int) -> None:
    # Each block is a mapping and two strings: three values, plus the list and the root.
    nodes = payload_weight(_blocks(count)).nodes
    assert 3 * count / 2 <= nodes <= 3 * count * 2


def test_weight_of_a_listing_counts_every_tool_it_did_not_visit() -> None:
    # A tool is a mapping, its name, its schema mapping and the schema's type string.
    assert payload_weight(_tools(20_000)).nodes >= 4 * 20_000 / 2
