# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 2.x over stdio: the client in this process, each server in a subprocess instrumented
the same way (it dumps its spans and metrics when the client closes the pipe). Checks exact
counts on both sides, one trace per call across the process boundary, `network.transport=pipe`
on both sides, and sessions (handshake era only)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.integration.apps import payloads
from tests.integration.apps._line import HAS_FASTMCP, IS_MCP2
from tests.integration.apps.client import Target
from tests.integration.v2_checks import (
    check_client_spans,
    check_durations,
    check_sampling_spans,
    check_server_spans,
    check_side_metrics,
    expected_exchanges,
)
from tests.integration.v2_stdio_server import DUMP_ENV
from tests.integration.v2_support import instrumented, load_dump, run_session

pytestmark = [
    pytest.mark.skipif(not IS_MCP2, reason="mcp 2.x instrumentation; this interpreter has mcp 1.x"),
    pytest.mark.timeout(120),
]


def _cases() -> list[Any]:
    cases = [
        pytest.param("lowlevel", "legacy", id="lowlevel-legacy"),
        pytest.param("lowlevel", "modern", id="lowlevel-modern"),
    ]
    cases.append(pytest.param("sdk_fastmcp", "legacy", id="sdk_fastmcp-legacy"))
    if HAS_FASTMCP:
        cases.append(pytest.param("fastmcp", "modern", id="fastmcp-modern"))
    return cases


def _instrumented_python(directory: Path) -> str:
    """An executable that runs `-m MODULE ARGS` under v2_stdio_server (a stdio Target's python)."""
    wrapper = directory / "instrumented-python"
    wrapper.write_text(
        f"#!{sys.executable}\nfrom tests.integration.v2_stdio_server import main\n\nmain()\n",
        encoding="utf-8",
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


@pytest.mark.parametrize(("flavour", "era"), _cases())
def test_stdio_session_is_exact_on_both_sides(flavour: str, era: str, tmp_path: Path) -> None:
    dump = tmp_path / "server-telemetry.json"
    target = Target(flavour, "stdio", env={DUMP_ENV: str(dump)}, python=_instrumented_python(tmp_path))
    with instrumented() as telemetry:
        session = anyio.run(lambda: run_session(target, era=era))
        client_spans = telemetry.spans()
        server_spans, server = load_dump(dump)
        server_name = payloads.SERVER_NAMES[flavour]
        assert session.server_name == server_name

        pairs = check_client_spans(client_spans, session, jsonrpc=True, network={"network.transport": "pipe"})
        check_server_spans([*client_spans, *server_spans], pairs, network_keys=("network.transport",))
        assert {
            s.attributes.get("network.transport")
            for s in server_spans
            if "mcp_tokens.encoding" in s.attributes
        } == {"pipe"}
        check_sampling_spans([*client_spans, *server_spans], session, server_side=era == "legacy")

        legacy = era == "legacy"
        check_side_metrics(
            telemetry, "client", expected_exchanges(session, era, True), server_name, budgeted=True
        )
        check_side_metrics(
            server, "server", expected_exchanges(session, era, legacy), server_name, budgeted=legacy
        )
        check_durations(
            telemetry, "mcp.client.operation.duration", session.exchanges, session.protocol_version
        )
        check_durations(server, "mcp.server.operation.duration", session.exchanges, session.protocol_version)
        for side, points in (
            ("client", telemetry.points("mcp.client.session.duration")),
            ("server", server.points("mcp.server.session.duration")),
        ):
            assert sum(p.count for _, p in points) == (1 if legacy else 0), side
            for attributes, _ in points:
                assert attributes["network.transport"] == "pipe"
                assert attributes["mcp.protocol.version"] == session.protocol_version
        assert os.path.getsize(dump) > 0
