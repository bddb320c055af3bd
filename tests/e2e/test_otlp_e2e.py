# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The same calls with `opentelemetry-instrument --metrics_exporter otlp --traces_exporter otlp`
(OTLP/HTTP protobuf) to a receiver in this process: the metric values equal the exact
tiktoken sums, and the spans carry the mcp_tokens.* attributes with per-call exact counts."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from examples.demo_client import MARKER
from examples.processes import HOST, free_port, otlp_env, read_marked_line, start_module

from .conftest import require_sdk_configurator, write_calls
from .expected import EXACT_CALLS, request_tokens, response_tokens, totals_by_tool
from .otlp_names import collector_name
from .otlp_receiver import OtlpReceiver, running_otlp_receiver
from .test_prometheus_e2e import CONTRACT_METRICS

pytestmark = pytest.mark.slow

SERVER_SERVICE = "mcp-tokens-otlp-server"
CLIENT_SERVICE = "mcp-tokens-otlp-client"
STARTUP_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 60.0
EXPORT_TIMEOUT_S = 20.0
SERVICES = {"server": SERVER_SERVICE, "client": CLIENT_SERVICE}


@dataclass
class OtlpRun:
    receiver: OtlpReceiver
    client_report: dict[str, object]
    launcher_args: list[str]


def _payload_sums(receiver: OtlpReceiver, side: str, direction: str) -> dict[str, float]:
    points = receiver.histogram_sums(
        SERVICES[side],
        "mcp_tokens.payload",
        **{"mcp_tokens.side": side, "mcp_tokens.direction": direction, "mcp.method.name": "tools/call"},
    )
    sums: dict[str, float] = {}
    for attributes, point in points.items():
        tool = str(dict(attributes).get("gen_ai.tool.name", ""))
        sums[tool] = sums.get(tool, 0.0) + point.sum
    return sums


def _expected(direction: str) -> dict[str, float]:
    return {tool: float(getattr(totals, direction)) for tool, totals in totals_by_tool().items()}


def _all_exported(receiver: OtlpReceiver) -> bool:
    return all(
        _payload_sums(receiver, side, direction) == _expected(direction)
        for side in SERVICES
        for direction in ("request", "response")
    ) and all(len(_call_spans(receiver, side)) >= len(EXACT_CALLS) for side in SERVICES)


def _call_spans(receiver: OtlpReceiver, side: str) -> list:  # type: ignore[type-arg]
    return [
        span
        for span in receiver.spans_of(SERVICES[side])
        if span.attributes.get("mcp.method.name") == "tools/call" and "mcp_tokens.response" in span.attributes
    ]


@pytest.fixture(scope="module")
def otlp_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OtlpRun]:
    require_sdk_configurator()
    workdir: Path = tmp_path_factory.mktemp("e2e-otlp")
    # The launcher's own flags, as a user would type them; the endpoint and protocol by environment.
    launcher_args = ["--metrics_exporter", "otlp", "--traces_exporter", "otlp"]
    with running_otlp_receiver() as receiver:
        mcp_port = free_port()
        server = start_module(
            "otlp-server",
            "examples.demo_server",
            ["--port", str(mcp_port)],
            otlp_env(SERVER_SERVICE, receiver.endpoint),
            workdir,
            launcher_args=launcher_args,
            ports=(mcp_port,),
        )
        client = None
        try:
            server.wait_ready(STARTUP_TIMEOUT_S)
            client = start_module(
                "otlp-client",
                "examples.demo_client",
                [
                    "--url",
                    f"http://{HOST}:{mcp_port}/mcp",
                    "--scenario",
                    "calls",
                    "--calls-file",
                    str(write_calls(workdir / "calls.json")),
                ],
                otlp_env(CLIENT_SERVICE, receiver.endpoint),
                workdir,
                launcher_args=launcher_args,
                stdout_pipe=True,
            )
            report = json.loads(read_marked_line(client, MARKER, CLIENT_TIMEOUT_S))
            # Periodic exports (every 0.5 s) and the exit-time flush both deliver; wait for all.
            receiver.wait_until(lambda: _all_exported(receiver), EXPORT_TIMEOUT_S)
            yield OtlpRun(receiver, report, launcher_args)
        finally:
            if client is not None:
                client.stop()
            server.stop()


@pytest.mark.parametrize("side", ["server", "client"])
@pytest.mark.parametrize("direction", ["response", "request"])
def test_otlp_metrics_carry_the_exact_token_sums(otlp_run: OtlpRun, side: str, direction: str) -> None:
    assert otlp_run.client_report["errors"] == []
    assert _payload_sums(otlp_run.receiver, side, direction) == _expected(direction)


@pytest.mark.parametrize("side", ["server", "client"])
def test_otlp_spans_carry_exact_per_call_counts(otlp_run: OtlpRun, side: str) -> None:
    spans = _call_spans(otlp_run.receiver, side)
    got = Counter(
        (
            span.attributes.get("gen_ai.tool.name"),
            span.attributes["mcp_tokens.response"],
            span.attributes.get("mcp_tokens.request"),
        )
        for span in spans
    )
    want = Counter((tool, response_tokens(tool, args), request_tokens(args)) for tool, args in EXACT_CALLS)
    assert got == want
    for span in spans:
        assert span.attributes["mcp_tokens.encoding"] == "o200k_base"
        assert span.attributes["mcp_tokens.risk"] in ("low", "medium", "high", "critical")
        assert isinstance(span.attributes["mcp_tokens.exact"], bool)
        assert 0.0 <= float(span.attributes["mcp_tokens.overhead_ratio"]) <= 1.0


@pytest.mark.parametrize("side", ["server", "client"])
def test_otlp_spans_report_padding_as_events(otlp_run: OtlpRun, side: str) -> None:
    padded = [
        s
        for s in _call_spans(otlp_run.receiver, side)
        if s.attributes.get("gen_ai.tool.name") == "policy_document"
    ]
    assert len(padded) == 1
    reasons = {
        attributes.get("mcp_tokens.padding.reason")
        for name, attributes in padded[0].events
        if name == "mcp_tokens.padding"
    }
    assert {"invisible", "repetition"} <= reasons


def test_one_trace_per_call_across_client_and_server(otlp_run: OtlpRun) -> None:
    client_traces = {span.trace_id for span in _call_spans(otlp_run.receiver, "client")}
    server_spans = _call_spans(otlp_run.receiver, "server")
    assert len(client_traces) == len(EXACT_CALLS)
    assert {span.trace_id for span in server_spans} == client_traces


def test_a_collector_names_every_metric_as_the_scrape_path_does(otlp_run: OtlpRun) -> None:
    """Through a Collector's prometheusremotewrite exporter (or Prometheus' OTLP receiver) the
    metrics get the names the dashboards and alerts read on the scrape path, and arrive
    cumulative (that exporter drops delta sums and histograms)."""
    descriptors = {
        descriptor
        for (service, name), descriptor in otlp_run.receiver.descriptors.items()
        if service in SERVICES.values() and name.startswith(("mcp_tokens.", "mcp."))
    }
    assert len({d.name for d in descriptors}) >= 8
    suffixes = ("_bucket", "_sum", "_count")
    families = {name.rsplit("_", 1)[0] if name.endswith(suffixes) else name for name in CONTRACT_METRICS}
    for descriptor in descriptors:
        assert descriptor.cumulative, descriptor
        assert collector_name(descriptor) in families, descriptor
