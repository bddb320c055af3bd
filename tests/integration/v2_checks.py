# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Assertions shared by the mcp 2.x tests: spans and metrics of one recorded standard session.

Every expected value is computed from the wire JSON the session recorded (see
`v2_support.Session`), with the token rules of `v2_support`, never taken from the
instrumentation under test.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from tests.integration.apps import payloads
from tests.integration.v2_support import (
    BUDGETED,
    CALL_METHODS,
    FASTMCP_SCOPE,
    OUR_SCOPE,
    SDK_SCOPE,
    Call,
    MetricSource,
    Session,
    overhead,
    padding_reasons,
    request_tokens,
    response_tokens,
    risk,
    select,
    tool_definitions,
)

SAMPLING = "sampling/createMessage"


def target_key(method: str) -> str:
    return "gen_ai.prompt.name" if method.startswith("prompts/") else "gen_ai.tool.name"


def sampling_call(era: str, sampled: bool) -> list[Call]:
    """The sampling exchange the `sample` tool makes (its wire shape, from the app's payloads)."""
    if not sampled:
        return []
    prompt = dict(payloads.STANDARD_CALLS)["sample"]["prompt"]
    params = {
        "messages": payloads.sampling_request_messages(prompt),
        "maxTokens": payloads.SAMPLING_MAX_TOKENS,
    }
    result = {"content": {"type": "text", "text": payloads.sampling_answer(prompt)}}
    return [Call(SAMPLING, params, result)]


def is_exchange_client_span(span: ReadableSpan, *methods: str) -> bool:
    """A CLIENT span of the SDK or ours (not fastmcp's own) for one of `methods` (default:
    the token-bearing calls)."""
    return (
        span.kind is SpanKind.CLIENT
        and span.instrumentation_scope is not None
        and span.instrumentation_scope.name in (SDK_SCOPE, OUR_SCOPE)
        and (span.attributes or {}).get("mcp.method.name") in (methods or CALL_METHODS)
    )


def check_tokens(span: ReadableSpan, call: Call) -> None:
    attributes = span.attributes or {}
    wanted_request = request_tokens(call.method, call.params)
    wanted_response = response_tokens(call.method, call.result)
    assert attributes.get("mcp_tokens.request") == wanted_request, (span.name, attributes)
    assert attributes.get("mcp_tokens.response") == wanted_response, (span.name, attributes)
    if wanted_request is not None or wanted_response is not None:
        assert attributes["mcp_tokens.encoding"] == "o200k_base"
        assert attributes["mcp_tokens.exact"] is True
    if wanted_response is not None:
        assert attributes["mcp_tokens.risk"] == risk(wanted_response)
        assert attributes["mcp_tokens.overhead"] == sum(overhead(call.method, call.result).values())


def check_client_spans(
    spans: Sequence[ReadableSpan],
    session: Session,
    *,
    jsonrpc: bool,
    network: Mapping[str, Any],
) -> list[tuple[Call, ReadableSpan]]:
    """One CLIENT span per recorded exchange (SDK's adopted, or ours), exact, semconv-named.

    The spans of the SDK's and our scope must match the recorded requests one to one, in
    order: a duplicate (ours next to the SDK's) or a missing span fails the comparison.
    """
    clients = [s for s in spans if is_exchange_client_span(s) and (s.start_time or 0) >= session.since_ns]
    exchanges = session.exchanges
    assert [(s.attributes or {})["mcp.method.name"] for s in clients] == [c.method for c in exchanges]
    pairs = list(zip(exchanges, clients, strict=True))
    for call, span in pairs:
        attributes = span.attributes or {}
        assert span.name == call.span_name
        if call.target:
            assert attributes[target_key(call.method)] == call.target
        if call.method == "tools/call":
            assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.protocol.version"] == session.protocol_version
        assert ("jsonrpc.request.id" in attributes) is jsonrpc
        for key, value in network.items():
            assert attributes.get(key) == value, (key, attributes)
        assert attributes.get("error.type") == call.error_type, (span.name, attributes)
        if call.error_type is not None:
            assert span.status.status_code is StatusCode.ERROR
        check_tokens(span, call)
    return pairs


def check_server_spans(
    spans: Sequence[ReadableSpan],
    pairs: Sequence[tuple[Call, ReadableSpan]],
    *,
    network_keys: Sequence[str] = (),
) -> None:
    """The server's SERVER span of each exchange: a child of the CLIENT span, exact, enriched."""
    for call, client in pairs:
        children = [s for s in spans if s.parent is not None and s.parent.span_id == client.context.span_id]
        servers = [s for s in children if s.kind is SpanKind.SERVER and s.name != SAMPLING]
        assert len(servers) == 1, (call.span_name, [(s.name, s.kind) for s in children])
        server = servers[0]
        assert server.context.trace_id == client.context.trace_id
        assert server.instrumentation_scope is not None
        assert server.instrumentation_scope.name in (SDK_SCOPE, FASTMCP_SCOPE)
        attributes = server.attributes or {}
        assert server.name == call.span_name
        assert attributes["mcp.method.name"] == call.method
        if call.method == "tools/call":
            assert attributes["gen_ai.tool.name"] == call.target
            assert attributes["gen_ai.operation.name"] == "execute_tool"
        if call.method == "resources/read":
            assert attributes["mcp.resource.uri"] == call.params["uri"]  # type: ignore[index]
        for key in network_keys:
            assert key in attributes, (key, attributes)
        if call.error_type == "tool_error":
            assert attributes["error.type"] == "tool_error"
        elif call.error_type is not None:  # fastmcp names the exception; the SDK the code
            assert attributes["error.type"] in (call.error_type, type(call.error).__qualname__)
            assert attributes["rpc.response.status_code"] == call.error_type
        check_tokens(server, call)
        in_trace = [
            s for s in spans if s.context.trace_id == client.context.trace_id and s.name == server.name
        ]
        requests = sum(1 for s in in_trace if is_exchange_client_span(s))
        answers = sum(1 for s in in_trace if s.kind is SpanKind.SERVER)
        assert answers == requests, f"{answers} SERVER spans for {requests} {server.name} requests"


def check_sampling_spans(spans: Sequence[ReadableSpan], session: Session, *, server_side: bool) -> None:
    """The client's answer to sampling: our SERVER span, in the trace of the `sample` call."""
    (call,) = sampling_call("", True)
    sample_traces = {
        s.context.trace_id for s in spans if is_exchange_client_span(s) and s.name == "tools/call sample"
    }
    answers = [s for s in spans if s.name == SAMPLING and s.kind is SpanKind.SERVER]
    assert len(answers) == 1
    answer = answers[0]
    assert answer.instrumentation_scope is not None and answer.instrumentation_scope.name == OUR_SCOPE
    assert answer.context.trace_id in sample_traces
    check_tokens(answer, call)
    if server_side:  # the server's own request: the SDK's CLIENT span, adopted and counted
        requests = [s for s in spans if s.name.startswith(SAMPLING) and s.kind is SpanKind.CLIENT]
        assert len(requests) == 1
        assert answer.parent is not None and answer.parent.span_id == requests[0].context.span_id
        check_tokens(requests[0], call)


def expected_exchanges(session: Session, era: str, sampled: bool) -> list[Call]:
    return session.exchanges + sampling_call(era, sampled)


def check_side_metrics(
    telemetry: MetricSource, side: str, calls: Sequence[Call], server_name: str, *, budgeted: bool
) -> None:
    """Every mcp_tokens metric of one side, summed from the recorded exchanges."""
    on_side = {"mcp_tokens__side": side}
    payload = telemetry.points("mcp_tokens.payload")
    wanted: dict[tuple[str, str, str | None], list[int]] = defaultdict(list)
    for call in calls:
        for direction, tokens in (
            ("request", request_tokens(call.method, call.params)),
            ("response", response_tokens(call.method, call.result)),
        ):
            if tokens is not None:
                wanted[(call.method, direction, call.target)].append(tokens)
    for (method, direction, target), values in wanted.items():
        found = select(payload, **on_side, mcp_tokens__direction=direction, mcp__method__name=method)
        found = [(a, p) for a, p in found if a.get(target_key(method)) == target]
        assert found, (side, method, direction, target)
        assert {a["mcp_tokens.server.name"] for a, _ in found} == {server_name}
        assert sum(p.count for _, p in found) == len(values), (side, method, direction, target)
        assert sum(p.sum for _, p in found) == sum(values), (side, method, direction, target)
    listing = [c for c in calls if c.method == "tools/list" and c.result is not None][-1]
    gauge = {
        a["gen_ai.tool.name"]: p.value
        for a, p in select(telemetry.points("mcp_tokens.tool.definition"), **on_side)
    }
    assert gauge == tool_definitions(listing.result or {})
    responses = Counter[str]()
    overheads = Counter[str]()
    paddings = Counter[str]()
    for call in calls:
        tokens = response_tokens(call.method, call.result)
        if tokens is not None:
            responses[risk(tokens)] += 1
        overheads.update(overhead(call.method, call.result))
        paddings.update(padding_reasons(call.method, call.params, call.result))
    assert _sum_by(telemetry.points("mcp_tokens.responses"), side, "mcp_tokens.risk") == responses
    assert _sum_by(telemetry.points("mcp_tokens.overhead"), side, "mcp_tokens.overhead.kind") == overheads
    assert (
        _sum_by(telemetry.points("mcp_tokens.padding.detections"), side, "mcp_tokens.padding.reason")
        == paddings
    )
    assert paddings and overheads["duplicate"] > 0 and overheads["formatting"] > 0
    utilization = select(telemetry.points("mcp_tokens.budget.utilization"), **on_side)
    budgeted_calls = sum(1 for c in calls if c.method in BUDGETED) if budgeted else 0
    assert sum(p.count for _, p in utilization) == budgeted_calls, side


def check_durations(
    telemetry: MetricSource, metric: str, calls: Sequence[Call], protocol_version: str | None
) -> None:
    """The semconv operation duration: one point per exchange, with the semconv attributes."""
    points = telemetry.points(metric)
    wanted = Counter((c.method, c.target, c.error_type) for c in calls if c.method in CALL_METHODS)
    for (method, target, error_type), number in wanted.items():
        found = [
            (a, p)
            for a, p in select(points, mcp__method__name=method)
            if a.get(target_key(method)) == target and a.get("error.type") == error_type
        ]
        assert sum(p.count for _, p in found) == number, (metric, method, target, error_type)
        for attributes, _ in found:
            assert attributes.get("mcp.protocol.version") == protocol_version
            assert (attributes.get("gen_ai.operation.name") == "execute_tool") is (method == "tools/call")
            if error_type is not None and error_type != "tool_error":
                assert attributes["rpc.response.status_code"] == error_type


def session_points(telemetry: MetricSource, metric: str) -> list[tuple[dict[str, Any], Any]]:
    return telemetry.points(metric)


def _sum_by(points: Sequence[tuple[dict[str, Any], Any]], side: str, key: str) -> Counter[str]:
    totals = Counter[str]()
    for attributes, point in select(points, mcp_tokens__side=side):
        totals[attributes[key]] += point.value
    return totals
