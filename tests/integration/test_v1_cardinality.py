# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x: label values stay bounded whatever a peer sends. A client calling 300 distinct tool
names the server never listed folds them into `_OTHER` on every metric, on both sides."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from tests.integration.apps._line import IS_MCP1, describe

if not IS_MCP1:
    pytest.skip(f"mcp 1.x instrumentation tests; this interpreter has {describe()}", allow_module_level=True)

from tests.integration._v1_support import Point, Telemetry
from tests.integration.apps import payloads
from tests.integration.apps.client import Target, connect

pytestmark = pytest.mark.timeout(120)

UNKNOWN_TOOLS = [f"made-up-tool-{i:03d}" for i in range(300)]
ALLOWED = {*payloads.TOOL_NAMES, "_OTHER"}


@pytest.fixture(scope="module")
def points() -> Iterator[list[Point]]:
    telemetry = Telemetry()
    telemetry.reset()

    async def session() -> None:
        async with connect(Target("lowlevel", "memory")) as driver:
            await driver.list_tools()  # the server's own listing: these names are labels
            await driver.call_tool("echo", {"text": "known"})
            for name in UNKNOWN_TOOLS:
                outcome = await driver.call_tool(name, {"q": name})
                assert outcome.error_code == 0  # the lowlevel app raises for unknown tools

    anyio.run(session)
    _, collected = telemetry.collect()
    telemetry.close()
    yield collected


def tool_labels(points: list[Point], metric: str) -> set[str]:
    return {
        p.attributes["gen_ai.tool.name"]
        for p in points
        if p.metric == metric and "gen_ai.tool.name" in p.attributes
    }


@pytest.mark.parametrize(
    "metric",
    [
        "mcp_tokens.payload",
        "mcp.client.operation.duration",
        "mcp.server.operation.duration",
        "mcp_tokens.tool.definition",
    ],
)
def test_unknown_tool_names_fold_into_other(points: list[Point], metric: str) -> None:
    labels = tool_labels(points, metric)
    assert labels and labels <= ALLOWED, sorted(labels - ALLOWED)[:5]


@pytest.mark.parametrize("side", ["client", "server"])
def test_the_folded_series_counts_every_call(points: list[Point], side: str) -> None:
    requests = [
        p
        for p in points
        if p.metric == "mcp_tokens.payload"
        and p.attributes["mcp_tokens.side"] == side
        and p.attributes["mcp.method.name"] == "tools/call"
        and p.attributes["mcp_tokens.direction"] == "request"
    ]
    by_tool = {p.attributes["gen_ai.tool.name"]: p.count for p in requests}
    assert by_tool == {"echo": 1, "_OTHER": len(UNKNOWN_TOOLS)}


def test_series_stay_bounded(points: list[Point]) -> None:
    per_metric: dict[str, int] = {}
    for point in points:
        per_metric[point.metric] = per_metric.get(point.metric, 0) + 1
    # Two sides, a handful of methods, 10 listed tools + _OTHER: nowhere near 300 names.
    assert max(per_metric.values()) < 60, per_metric
