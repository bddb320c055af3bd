# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp 1.x, every transport x server flavour (and fastmcp's client): spans per the MCP semantic
conventions with one trace from client to server, exact token counts on both sides, and the
metrics contract. One standard session per case (H6's harness), shared by the tests below."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.apps._line import HAS_FASTMCP, IS_MCP1, describe

if not IS_MCP1:
    pytest.skip(f"mcp 1.x instrumentation tests; this interpreter has {describe()}", allow_module_level=True)

import anyio

from tests.integration._v1_support import (
    TRANSPORTS,
    CaseResult,
    Expected,
    SpanRecord,
    Telemetry,
    run_case,
    skipped_tools,
)
from tests.integration.apps import harness, payloads
from tests.integration.apps.client import Target, connect

pytestmark = pytest.mark.timeout(180)

FLAVOURS = [f for f in harness.FLAVOURS if f != "fastmcp" or HAS_FASTMCP]
CASES = [(flavour, transport, "sdk") for flavour in FLAVOURS for transport in TRANSPORTS]
if HAS_FASTMCP:
    CASES += [("fastmcp", transport, "fastmcp") for transport in TRANSPORTS]
CASE_IDS = [f"{flavour}-{transport}-{client}" for flavour, transport, client in CASES]
ARGUMENTS = dict(payloads.STANDARD_CALLS)
RISK_BOUNDS = ((1000, "low"), (4000, "medium"), (8000, "high"))


@pytest.fixture(scope="module")
def telemetry() -> Iterator[Telemetry]:
    telemetry = Telemetry()
    yield telemetry
    telemetry.close()


@pytest.fixture(scope="module")
def expected() -> Expected:
    return Expected()


@pytest.fixture(scope="module")
def listings(telemetry: Telemetry) -> dict[str, list[dict[str, Any]]]:
    """Each flavour's tools/list, as the SDK client received it (all transports serve the same)."""

    async def listing(flavour: str) -> list[dict[str, Any]]:
        async with connect(Target(flavour, "memory")) as driver:
            return await driver.list_tools()

    return {flavour: anyio.run(listing, flavour) for flavour in FLAVOURS}


@pytest.fixture(scope="module")
def results(telemetry: Telemetry, listings: Any) -> dict[tuple[str, str, str], CaseResult]:
    return {}


@pytest.fixture(params=CASES, ids=CASE_IDS)
def case(request: pytest.FixtureRequest, telemetry: Telemetry, results: dict[Any, CaseResult]) -> CaseResult:
    key = request.param
    if key not in results:
        results[key] = run_case(telemetry, *key)
    return results[key]


def called_tools(case: CaseResult) -> list[str]:
    return [name for name in payloads.TOOL_NAMES if name not in skipped_tools(case.transport)]


def risk_of(tokens: int) -> str:
    return next((tier for bound, tier in RISK_BOUNDS if tokens <= bound), "critical")


def client_server_pair(case: CaseResult, name: str) -> tuple[SpanRecord, SpanRecord]:
    """The CLIENT span of an operation and the SERVER span that must be its child."""
    client = case.one_span(name, "CLIENT")
    servers = [s for s in case.spans_named(name, "SERVER") if s.parent_id == client.span_id]
    assert len(servers) == 1, f"{name}: no SERVER span parented on the CLIENT span"
    assert servers[0].trace_id == client.trace_id
    return client, servers[0]


# --- spans ------------------------------------------------------------------------------
def test_every_operation_is_one_client_span_and_its_server_child(case: CaseResult) -> None:
    names = [
        "initialize",
        "tools/list",
        *(f"tools/call {t}" for t in called_tools(case)),
        "prompts/get review",
    ]
    for name in names:
        client, server = client_server_pair(case, name)
        method = name.split(" ")[0]
        for span in (client, server):
            assert span.attributes["mcp.method.name"] == method
            assert span.attributes["jsonrpc.request.id"] == client.attributes["jsonrpc.request.id"]
            assert span.attributes["mcp.protocol.version"] == case.report.protocol_version
    reads = [s for s in case.spans if s.name == "resources/read"]
    assert sorted(s.attributes["mcp.resource.uri"] for s in reads) == sorted(2 * list(payloads.RESOURCES))
    for span in reads:
        if span.kind == "SERVER":
            parent = next(s for s in reads if s.span_id == span.parent_id)
            assert (
                parent.kind == "CLIENT"
                and parent.attributes["mcp.resource.uri"] == span.attributes["mcp.resource.uri"]
            )


def test_tool_and_prompt_attributes(case: CaseResult) -> None:
    for tool in called_tools(case):
        for span in client_server_pair(case, f"tools/call {tool}"):
            assert span.attributes["gen_ai.tool.name"] == tool
            assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    for span in client_server_pair(case, "prompts/get review"):
        assert span.attributes["gen_ai.prompt.name"] == payloads.PROMPT_NAME
        assert "gen_ai.operation.name" not in span.attributes


def test_errors_follow_the_semconv_rules(case: CaseResult) -> None:
    for span in client_server_pair(case, "tools/call fail"):
        assert (span.attributes["error.type"], span.status) == ("tool_error", "ERROR")
    for span in client_server_pair(case, "tools/call boom"):
        assert span.attributes["error.type"] == str(payloads.BOOM_CODE)
        assert span.attributes["rpc.response.status_code"] == str(payloads.BOOM_CODE)
        assert span.status == "ERROR"  # -32032 is a server error on both sides
    for span in client_server_pair(case, "tools/call echo"):
        assert "error.type" not in span.attributes and span.status == "UNSET"


def test_network_and_session_attributes(case: CaseResult) -> None:
    client, server = client_server_pair(case, "tools/call echo")
    if case.transport == "memory":
        assert "network.transport" not in client.attributes and "network.transport" not in server.attributes
    elif case.transport == "stdio":
        assert client.attributes["network.transport"] == server.attributes["network.transport"] == "pipe"
    else:
        assert client.attributes["network.transport"] == server.attributes["network.transport"] == "tcp"
        assert (
            client.attributes["network.protocol.name"] == server.attributes["network.protocol.name"] == "http"
        )
        assert client.attributes["server.address"] == harness.HOST
        assert isinstance(client.attributes["server.port"], int)
        assert server.attributes["client.address"] == harness.HOST
        assert "server.address" not in server.attributes
    if case.transport == "streamable-http":
        assert client.attributes["mcp.session.id"] == server.attributes["mcp.session.id"]
        assert (
            case.one_span("initialize", "SERVER").attributes["mcp.session.id"]
            == client.attributes["mcp.session.id"]
        )
    else:
        assert "mcp.session.id" not in client.attributes and "mcp.session.id" not in server.attributes


def test_sampling_is_a_client_span_on_the_server_and_a_server_span_on_the_client(case: CaseResult) -> None:
    if "sample" not in called_tools(case):
        # Handshake-era stateless HTTP cannot sample (a 1.x server would wait forever).
        assert case.spans_named("sampling/createMessage") == []
        return
    tool_client, tool_server = client_server_pair(case, "tools/call sample")
    ask, answer = client_server_pair(case, "sampling/createMessage")
    assert ask.parent_id == tool_server.span_id
    assert {ask.trace_id, answer.trace_id, tool_server.trace_id} == {tool_client.trace_id}


def test_budget_scopes_per_session(case: CaseResult) -> None:
    budgeted = [s for s in case.spans if "mcp_tokens.budget.scope" in s.attributes]
    client_scopes = {s.attributes["mcp_tokens.budget.scope"] for s in budgeted if s.kind == "CLIENT"}
    server_scopes = {s.attributes["mcp_tokens.budget.scope"]: s for s in budgeted if s.kind == "SERVER"}
    assert len(client_scopes) == 1 and next(iter(client_scopes)).startswith("client-session-")
    if case.transport == "streamable-http":
        session_id = case.one_span("tools/call echo", "CLIENT").attributes["mcp.session.id"]
        assert set(server_scopes) == {session_id}
    elif case.transport == "stateless-http":
        assert all(scope.startswith("server-session-") for scope in server_scopes)
        assert len(server_scopes) > 1  # every request is its own connection
    else:
        assert len(server_scopes) == 1 and next(iter(server_scopes)).startswith("server-session-")


# --- exact tokens -------------------------------------------------------------------------
def test_tool_tokens_are_exact_on_both_sides(case: CaseResult, expected: Expected) -> None:
    for tool in called_tools(case):
        for span in client_server_pair(case, f"tools/call {tool}"):
            assert span.attributes["mcp_tokens.request"] == expected.json(ARGUMENTS[tool]), tool
            if tool == "boom":
                assert "mcp_tokens.response" not in span.attributes
                continue
            assert span.attributes["mcp_tokens.response"] == expected.tool_result(tool, ARGUMENTS[tool]), tool
            assert span.attributes["mcp_tokens.exact"] is True
            assert span.attributes["mcp_tokens.encoding"] == "o200k_base"


def test_listing_resource_prompt_and_sampling_tokens(
    case: CaseResult, expected: Expected, listings: dict[str, list[dict[str, Any]]]
) -> None:
    definitions = {tool["name"]: expected.tool_definition(tool) for tool in listings[case.flavour]}
    for span in client_server_pair(case, "tools/list"):
        assert span.attributes["mcp_tokens.response"] == sum(definitions.values())
    for span in (s for s in case.spans if s.name == "resources/read"):
        assert span.attributes["mcp_tokens.response"] == expected.resource(
            span.attributes["mcp.resource.uri"]
        )
    for span in client_server_pair(case, "prompts/get review"):
        assert span.attributes["mcp_tokens.response"] == expected.prompt("x = 1")
    if "sample" in called_tools(case):
        prompt = ARGUMENTS["sample"]["prompt"]
        for span in client_server_pair(case, "sampling/createMessage"):
            assert span.attributes["mcp_tokens.request"] == expected.text(prompt)
            assert span.attributes["mcp_tokens.response"] == expected.text(payloads.sampling_answer(prompt))
    for side in ("client", "server"):
        for name, tokens in definitions.items():
            (point,) = case.points_of(
                "mcp_tokens.tool.definition",
                mcp_tokens__side=side,
                mcp_tokens__server__name=payloads.SERVER_NAMES[case.flavour],
                gen_ai__tool__name=name,
            )
            assert point.value == tokens, (side, name)


def test_lowlevel_definitions_match_the_hand_written_listing(
    listings: dict[str, list[dict[str, Any]]],
) -> None:
    wire = [
        {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema}
        for spec in payloads.TOOL_SPECS
    ]
    assert [{k: t[k] for k in ("name", "description", "inputSchema")} for t in listings["lowlevel"]] == wire


# --- metrics ------------------------------------------------------------------------------
def test_payload_and_risk_metrics(case: CaseResult, expected: Expected) -> None:
    server_name = payloads.SERVER_NAMES[case.flavour]
    for side in ("client", "server"):
        for tool in called_tools(case):
            base = {"mcp_tokens__side": side, "mcp__method__name": "tools/call", "gen_ai__tool__name": tool}
            (request,) = case.points_of("mcp_tokens.payload", mcp_tokens__direction="request", **base)
            assert (request.count, request.value) == (1, expected.json(ARGUMENTS[tool]))
            assert request.attributes["mcp_tokens.server.name"] == server_name
            assert request.attributes["mcp_tokens.encoding"] == "o200k_base"
            responses = case.points_of("mcp_tokens.payload", mcp_tokens__direction="response", **base)
            if tool == "boom":
                assert responses == []
                continue
            tokens = expected.tool_result(tool, ARGUMENTS[tool])
            assert [(p.count, p.value) for p in responses] == [(1, tokens)], (side, tool)
            (risk,) = case.points_of("mcp_tokens.responses", **base)
            assert (risk.attributes["mcp_tokens.risk"], risk.value) == (risk_of(tokens), 1)
        large = case.points_of(
            "mcp_tokens.responses", mcp_tokens__side=side, mcp__method__name="resources/read"
        )
        assert sorted(p.attributes["mcp_tokens.risk"] for p in large) == sorted(
            risk_of(expected.resource(uri)) for uri in payloads.RESOURCES
        )


def test_overhead_and_padding_metrics(case: CaseResult, expected: Expected) -> None:
    for side in ("client", "server"):
        overhead = {
            (p.attributes["gen_ai.tool.name"], p.attributes["mcp_tokens.overhead.kind"]): p.value
            for p in case.points_of(
                "mcp_tokens.overhead", mcp_tokens__side=side, mcp__method__name="tools/call"
            )
        }
        pretty = payloads.pretty_json_text(20)
        structured = payloads.structured_content(10)
        records = payloads.records_json(20)
        assert overhead == {
            ("records", "structure"): expected.structure_overhead(
                json.loads(records), expected.text(records)
            ),
            ("pretty_json", "formatting"): expected.formatting_overhead(pretty),
            ("pretty_json", "structure"): expected.structure_overhead(
                json.loads(pretty), expected.text(pretty)
            ),
            ("structured", "duplicate"): expected.json(structured),
            ("structured", "structure"): expected.structure_overhead(
                structured, expected.text(payloads.structured_text(10))
            ),
        }, side
        for tool in called_tools(case):
            detections = case.points_of(
                "mcp_tokens.padding.detections", mcp_tokens__side=side, gen_ai__tool__name=tool
            )
            span = next(
                s
                for s in case.spans_named(f"tools/call {tool}")
                if (s.kind == "CLIENT") == (side == "client")
            )
            events = [attributes for name, attributes in span.events if name == "mcp_tokens.padding"]
            assert sum(p.value for p in detections) == len(events), (side, tool)
            reasons = {p.attributes["mcp_tokens.padding.reason"] for p in detections}
            assert reasons == {e["mcp_tokens.padding.reason"] for e in events}
            if tool == "padded_document":  # a run of zero-width spaces
                assert "invisible" in reasons
            if tool in ("echo", "records", "structured", "fail"):
                assert detections == [], tool


def test_operation_and_session_durations(case: CaseResult) -> None:
    for metric in ("mcp.client.operation.duration", "mcp.server.operation.duration"):
        for tool in called_tools(case):
            (point,) = case.points_of(metric, mcp__method__name="tools/call", gen_ai__tool__name=tool)
            assert point.count == 1 and point.value > 0
        (initialize,) = case.points_of(metric, mcp__method__name="initialize")
        assert initialize.count == 1
        assert initialize.attributes["mcp.protocol.version"] == case.report.protocol_version
        assert (
            "mcp.session.id" not in initialize.attributes
            and "jsonrpc.request.id" not in initialize.attributes
        )
    (boom,) = case.points_of("mcp.client.operation.duration", gen_ai__tool__name="boom")
    assert (
        boom.attributes["error.type"]
        == boom.attributes["rpc.response.status_code"]
        == str(payloads.BOOM_CODE)
    )
    if "sample" in called_tools(case):
        # The server is the sender of sampling/createMessage: a client operation, and vice versa.
        for metric in ("mcp.client.operation.duration", "mcp.server.operation.duration"):
            (point,) = case.points_of(metric, mcp__method__name="sampling/createMessage")
            assert point.count == 1
    (client_session,) = case.points_of("mcp.client.session.duration")
    assert client_session.count == 1 and client_session.attributes["mcp.protocol.version"]
    server_sessions = case.points_of("mcp.server.session.duration")
    if case.transport == "stateless-http":
        assert server_sessions == []  # no session: every request is its own connection
    else:
        assert [p.count for p in server_sessions] == [1]
    if case.transport != "memory":
        transport = "pipe" if case.transport == "stdio" else "tcp"
        assert client_session.attributes["network.transport"] == transport


# --- the application sees exactly what it would without instrumentation -------------------
def test_calls_return_what_the_apps_send(case: CaseResult) -> None:
    report = case.report
    assert report.server_name == payloads.SERVER_NAMES[case.flavour]
    assert sorted(report.tool_names) == sorted(payloads.TOOL_NAMES)
    for tool in called_tools(case):
        outcome = report.calls[tool]
        if tool == "boom":  # the JSON-RPC error reached the caller with its code and message
            assert (outcome.error_code, outcome.error_message) == (payloads.BOOM_CODE, payloads.BOOM_MESSAGE)
        elif tool == "image":
            assert outcome.result is not None
            assert outcome.result["content"] == payloads.tool_result_wire("image", {})["content"]
        else:
            assert outcome.is_error_result == (tool == "fail")
            assert outcome.text == payloads.expected_text(tool, ARGUMENTS[tool])
    assert report.resources == {uri: payloads.resource_text(uri) for uri in payloads.RESOURCES}
    assert report.prompt_text == payloads.review_prompt_text("x = 1")
