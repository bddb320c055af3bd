# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""End-to-end smoke test of the test harness, WITHOUT the instrumentation: every server flavour over
every transport, on whichever mcp line this interpreter has, returns exactly the payloads that
`payloads` computes. Run it under each environment (see ENVIRONMENTS.md)."""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from tests.integration.apps import harness, payloads
from tests.integration.apps._line import HAS_FASTMCP, IS_MCP1, describe
from tests.integration.apps.client import (
    SessionReport,
    Target,
    run_standard_session,
    sampling_unsupported_reason,
)

pytestmark = pytest.mark.timeout(120)

FLAVOURS = [f for f in harness.FLAVOURS if f != "fastmcp" or HAS_FASTMCP]
ERAS = ["legacy"] if IS_MCP1 else ["legacy", "modern"]
TRANSPORTS = ["memory", "stdio", *harness.HTTP_TRANSPORTS]
MODERN_VERSION = "2026-07-28"
SESSION_TIMEOUT_S = 45.0


def _cases() -> list[Any]:
    cases = []
    for era in ERAS:
        for flavour in FLAVOURS:
            for transport in TRANSPORTS:
                cases.append(
                    pytest.param(flavour, transport, "sdk", era, id=f"{flavour}-{transport}-sdk-{era}")
                )
        if HAS_FASTMCP:
            # fastmcp's client against its own server (its in-memory transport needs one).
            for transport in TRANSPORTS:
                cases.append(
                    pytest.param(
                        "fastmcp", transport, "fastmcp", era, id=f"fastmcp-{transport}-fastmcp-{era}"
                    )
                )
    return cases


@pytest.fixture(scope="module")
def http_servers() -> Iterator[dict[tuple[str, str], harness.RunningServer]]:
    """Every flavour on every HTTP transport, started together and shared by the module's tests."""
    specs = [(flavour, transport) for flavour in FLAVOURS for transport in harness.HTTP_TRANSPORTS]
    with harness.running_servers(specs, startup_timeout_s=40.0) as servers:
        yield servers


def _target(flavour: str, transport: str, servers: dict[tuple[str, str], harness.RunningServer]) -> Target:
    if transport in harness.HTTP_TRANSPORTS:
        return Target(flavour, transport, base_url=servers[(flavour, transport)].base_url)
    return Target(flavour, transport)


def _expected_protocol_is_modern(client: str, transport: str, era: str) -> bool:
    # fastmcp's SSE transport is handshake-only, so its `auto` mode falls back to initialize.
    return era == "modern" and not (client == "fastmcp" and transport == "sse")


def _assert_png(data_b64: str) -> None:
    data = base64.b64decode(data_b64)
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (payloads.PNG_WIDTH, payloads.PNG_HEIGHT)


def _assert_tool_outcomes(report: SessionReport, called: set[str]) -> None:
    arguments = dict(payloads.STANDARD_CALLS)
    for name in called:
        outcome = report.calls[name]
        if name == "boom":
            assert (outcome.error_code, outcome.error_message) == (payloads.BOOM_CODE, payloads.BOOM_MESSAGE)
            continue
        assert outcome.result is not None, f"{name}: {outcome}"
        assert outcome.is_error_result == (name == "fail"), f"{name}: {outcome.result}"
        if name == "image":
            (block,) = outcome.result["content"]
            assert (block["type"], block["mimeType"]) == ("image", payloads.PNG_MIME)
            assert block["data"] == payloads.png_base64()
            _assert_png(block["data"])
            continue
        assert outcome.text == payloads.expected_text(name, arguments[name]), name
        if name == "structured":
            assert outcome.result["structuredContent"] == payloads.structured_content(arguments[name]["n"])


@pytest.mark.parametrize(("flavour", "transport", "client", "era"), _cases())
def test_standard_session(
    flavour: str,
    transport: str,
    client: str,
    era: str,
    http_servers: dict[tuple[str, str], harness.RunningServer],
) -> None:
    skip = {"sample"} if sampling_unsupported_reason(transport, era) else set()
    target = _target(flavour, transport, http_servers)
    report = anyio.run(
        lambda: run_standard_session(target, client=client, era=era, skip=skip, timeout_s=SESSION_TIMEOUT_S)
    )

    assert report.server_name == payloads.SERVER_NAMES[flavour], describe()
    assert (report.protocol_version == MODERN_VERSION) == _expected_protocol_is_modern(client, transport, era)
    assert sorted(report.tool_names) == sorted(payloads.TOOL_NAMES)
    assert set(report.calls) == set(payloads.TOOL_NAMES) - skip
    _assert_tool_outcomes(report, set(report.calls))
    assert report.resources == {uri: payloads.resource_text(uri) for uri in payloads.RESOURCES}
    assert report.prompt_text == payloads.review_prompt_text("x = 1")


def test_stateless_sampling_is_reported_unsupported_only_where_it_cannot_work() -> None:
    assert sampling_unsupported_reason("stateless-http", "legacy") is not None
    assert sampling_unsupported_reason("stateless-http", "modern") is None
    for transport in ("memory", "stdio", "sse", "streamable-http"):
        assert sampling_unsupported_reason(transport, "legacy") is None


def test_png_is_valid_and_deterministic() -> None:
    data = payloads.png_bytes(payloads.PNG_WIDTH, payloads.PNG_HEIGHT)
    assert data == payloads.png_bytes(payloads.PNG_WIDTH, payloads.PNG_HEIGHT)
    offset, chunks = 8, {}
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind, body = data[offset + 4 : offset + 8], data[offset + 8 : offset + 8 + length]
        (crc,) = struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])
        assert crc == zlib.crc32(kind + body) & 0xFFFFFFFF
        chunks[kind] = body
        offset += 12 + length
    assert set(chunks) == {b"IHDR", b"IDAT", b"IEND"}
    raw = zlib.decompress(chunks[b"IDAT"])
    assert len(raw) == payloads.PNG_HEIGHT * (1 + 3 * payloads.PNG_WIDTH)


def test_payload_shapes() -> None:
    assert len(payloads.sized_text(300).split(" ")) == 300
    assert payloads.sized_text(-5) == ""
    assert len(payloads.record_list(10**9)) == payloads.MAX_RECORDS
    assert payloads.DOC_LARGE_BYTES <= len(payloads.doc_large().encode()) < payloads.DOC_LARGE_BYTES + 200
    document = payloads.padded_document()
    assert document.count(payloads.ZERO_WIDTH_SPACE) >= payloads.ZERO_WIDTH_RUN
    assert document.count(payloads.REPEATED_PHRASE) == payloads.PHRASE_REPEATS
    assert payloads.expected_text("image", {}) is None
    with pytest.raises(ValueError, match="boom"):
        payloads.tool_result_wire("boom", {})
