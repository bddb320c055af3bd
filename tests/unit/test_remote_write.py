# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp_tokens_remote_write`: snappy's block format, the protobuf WriteRequest (decoded with the
protobuf runtime from the message definitions, not with our encoder's logic), settings, and
the exporter against a receiver in this process (retries, no retry on 4xx, labels)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.mcp_tokens.remote_write import (
    McpTokensRemoteWriteReader,
    job_and_instance,
    snappy,
)
from opentelemetry.exporter.mcp_tokens.remote_write.settings import RemoteWriteSettings
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource


# --- snappy ----------------------------------------------------------------------------------
def snappy_decode(data: bytes) -> bytes:
    """Snappy's block format, decoded by the rules of its format description."""
    length, shift, position = 0, 0, 0
    while True:
        byte = data[position]
        position += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    out = bytearray()
    while position < len(data):
        tag = data[position]
        position += 1
        kind = tag & 3
        if kind == 0:
            size = tag >> 2
            if size >= 60:
                extra = size - 59
                size = int.from_bytes(data[position : position + extra], "little")
                position += extra
            size += 1
            out += data[position : position + size]
            position += size
            continue
        if kind == 1:
            size = ((tag >> 2) & 7) + 4
            offset = ((tag >> 5) << 8) | data[position]
            position += 1
        elif kind == 2:
            size = (tag >> 2) + 1
            offset = int.from_bytes(data[position : position + 2], "little")
            position += 2
        else:
            size = (tag >> 2) + 1
            offset = int.from_bytes(data[position : position + 4], "little")
            position += 4
        assert 0 < offset <= len(out), (offset, len(out))
        for _ in range(size):
            out.append(out[-offset])
    assert len(out) == length
    return bytes(out)


@given(st.binary(max_size=5000))
@settings(max_examples=200, deadline=None)
def test_snappy_round_trips_any_bytes(data: bytes) -> None:
    assert snappy_decode(snappy.compress(data)) == data


def test_snappy_round_trips_long_matches_literals_and_overlaps() -> None:
    rng = random.Random(7)
    noise = bytes(rng.getrandbits(8) for _ in range(200_000))  # literals past 65,536 bytes
    cases = [b"", b"a", b"ab" * 100_000, noise, noise[:70_000] * 3, b"label_name" * 7 + noise[:100]]
    for data in cases:
        assert snappy_decode(snappy.compress(data)) == data


def test_snappy_compresses_what_remote_write_sends() -> None:
    series = b"".join(
        b"\n\x0f__name__\x12mcp_tokens_payload_bucket\x0agen_ai_tool_name\x12search_%d" % i
        for i in range(500)
    )
    assert len(snappy.compress(series)) < len(series) / 4


# --- protobuf --------------------------------------------------------------------------------
def _message_classes() -> dict[str, Any]:
    """prometheus/prompb's messages (remote.proto, types.proto), built by the protobuf runtime."""
    file = descriptor_pb2.FileDescriptorProto(name="prompb_test.proto", package="prometheus", syntax="proto3")
    fields = descriptor_pb2.FieldDescriptorProto

    def message(name: str, *specs: tuple[str, int, int, int, str]) -> None:
        proto = file.message_type.add(name=name)
        for field_name, number, kind, label, type_name in specs:
            field = proto.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name

    optional, repeated = fields.LABEL_OPTIONAL, fields.LABEL_REPEATED
    message(
        "Label", ("name", 1, fields.TYPE_STRING, optional, ""), ("value", 2, fields.TYPE_STRING, optional, "")
    )
    message(
        "Sample",
        ("value", 1, fields.TYPE_DOUBLE, optional, ""),
        ("timestamp", 2, fields.TYPE_INT64, optional, ""),
    )
    message(
        "TimeSeries",
        ("labels", 1, fields.TYPE_MESSAGE, repeated, ".prometheus.Label"),
        ("samples", 2, fields.TYPE_MESSAGE, repeated, ".prometheus.Sample"),
    )
    message(
        "MetricMetadata",
        ("type", 1, fields.TYPE_INT32, optional, ""),
        ("metric_family_name", 2, fields.TYPE_STRING, optional, ""),
        ("help", 4, fields.TYPE_STRING, optional, ""),
        ("unit", 5, fields.TYPE_STRING, optional, ""),
    )
    message(
        "WriteRequest",
        ("timeseries", 1, fields.TYPE_MESSAGE, repeated, ".prometheus.TimeSeries"),
        ("metadata", 3, fields.TYPE_MESSAGE, repeated, ".prometheus.MetricMetadata"),
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"prometheus.{name}"))
        for name in ("WriteRequest",)
    }


WRITE_REQUEST = _message_classes()["WriteRequest"]


def decode(body: bytes) -> dict[tuple[tuple[str, str], ...], tuple[float, int]]:
    request = WRITE_REQUEST()
    request.ParseFromString(snappy_decode(body))
    found = {}
    for series in request.timeseries:
        labels = tuple((label.name, label.value) for label in series.labels)
        assert list(labels) == sorted(labels), labels  # remote write requires sorted names
        ((value, timestamp),) = [(s.value, s.timestamp) for s in series.samples]
        found[labels] = (value, timestamp)
    return found


# --- a receiver ------------------------------------------------------------------------------
class Receiver:
    def __init__(self, statuses: list[int]) -> None:
        self.statuses = statuses  # answered in turn, then 204
        self.bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def answer(self, body: bytes, headers: dict[str, str]) -> int:
        with self.lock:
            self.bodies.append(body)
            self.headers.append(headers)
            return self.statuses.pop(0) if self.statuses else 204


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    state = Receiver([])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            status = state.answer(body, dict(self.headers.items()))
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}/api/v1/write"
    finally:
        server.shutdown()
        server.server_close()


RESOURCE = Resource.create({"service.name": "shop", "service.namespace": "prod", "host.name": "h1"})


def exporter_for(url: str, **overrides: Any) -> tuple[McpTokensRemoteWriteReader, MeterProvider]:
    options: dict[str, Any] = {"endpoint": url, "interval_s": 3600.0, "timeout_s": 5.0, **overrides}
    reader = McpTokensRemoteWriteReader(RemoteWriteSettings(**options))
    return reader, MeterProvider(metric_readers=[reader], resource=RESOURCE)


def test_a_push_carries_the_scrape_names_plus_job_and_instance(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    reader, provider = exporter_for(url, headers={"X-Scope-OrgID": "tenant-1"})
    meter = provider.get_meter("opentelemetry.instrumentation.mcp_tokens", "1.0")
    meter.create_counter("mcp_tokens.overhead", unit="{token}").add(
        9, {"mcp_tokens.overhead.kind": "duplicate"}
    )
    meter.create_histogram(
        "mcp_tokens.payload", unit="{token}", explicit_bucket_boundaries_advisory=[10]
    ).record(4)
    try:
        assert reader.push()
        (body,) = state.bodies
        headers = state.headers[0]
        assert headers["Content-Encoding"] == "snappy" and headers["X-Scope-Orgid"] == "tenant-1"
        assert headers["X-Prometheus-Remote-Write-Version"] == "0.1.0"
        series = decode(body)
        names = {dict(labels)["__name__"] for labels in series}
        assert {"mcp_tokens_overhead_total", "target_info", "mcp_tokens_payload_bucket"} <= names
        assert {"mcp_tokens_payload_count", "mcp_tokens_payload_sum"} <= names
        job, instance = job_and_instance(RESOURCE)
        assert job == "prod/shop" and len(instance) == 36  # service.instance.id, a UUID
        for labels, (_, timestamp) in series.items():
            assert dict(labels)["job"] == job and dict(labels)["instance"] == instance
            assert timestamp > 0
        overhead = next(
            v for labels, v in series.items() if dict(labels)["__name__"] == "mcp_tokens_overhead_total"
        )
        assert overhead[0] == 9.0
        (info,) = [dict(labels) for labels in series if dict(labels)["__name__"] == "target_info"]
        assert info["host_name"] == "h1" and "service_name" not in info
    finally:
        provider.shutdown()


def test_server_errors_are_retried_and_client_errors_are_not(receiver: tuple[Receiver, str]) -> None:
    state, url = receiver
    reader, provider = exporter_for(url)
    provider.get_meter("m").create_counter("mcp_tokens.things").add(1)
    try:
        state.statuses[:] = [503, 429]
        assert reader.push()
        assert len(state.bodies) == 3
        state.statuses[:] = [400]
        assert not reader.push()
        assert len(state.bodies) == 4
    finally:
        state.statuses[:] = []
        provider.shutdown()


def test_an_unreachable_receiver_costs_the_timeout_at_most(receiver: tuple[Receiver, str]) -> None:
    _, url = receiver
    closed = url.rsplit(":", 1)[0] + ":9/api/v1/write"  # discard port: nothing listens
    reader, provider = exporter_for(closed, timeout_s=0.5)
    provider.get_meter("m").create_counter("mcp_tokens.things").add(1)
    try:
        begin = time.monotonic()
        assert not reader.push()
        assert time.monotonic() - begin < 2.0
    finally:
        provider.shutdown()


def test_settings_parse_and_fall_back(caplog: pytest.LogCaptureFixture) -> None:
    prefix = "OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_"
    parsed = RemoteWriteSettings.from_env(
        {
            prefix + "ENDPOINT": "https://mimir.example/api/v1/push",
            prefix + "HEADERS": "Authorization=Bearer%20abc,X-Scope-OrgID=team-a,broken",
            prefix + "INTERVAL": "5000",
            prefix + "TIMEOUT": "soon",
        }
    )
    assert parsed.endpoint == "https://mimir.example/api/v1/push"
    assert dict(parsed.headers) == {"Authorization": "Bearer abc", "X-Scope-OrgID": "team-a"}
    assert parsed.interval_s == 5.0 and parsed.timeout_s == 10.0
    assert RemoteWriteSettings.from_env({prefix + "ENDPOINT": "mimir:9009"}).endpoint == ""
    assert RemoteWriteSettings.from_env({}).interval_s == 15.0
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 3
