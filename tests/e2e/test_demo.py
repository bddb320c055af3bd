# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The demo: its tools really have the shapes they claim, and `python -m examples.demo` (what
`make demo` runs) prints real numbers from both processes' /metrics and leaves nothing running."""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens.engine.padding import detect_padding
from opentelemetry.instrumentation.mcp_tokens.engine.risk import DEFAULT_RISK_THRESHOLDS
from PIL import Image

from examples import demo, demo_content
from examples.processes import port_accepts

from .conftest import require_sdk_configurator
from .expected import response_tokens, text_tokens

TIER_TOOLS = {
    "customer_lookup": "low",
    "search_orders": "medium",
    "quarterly_report": "high",
    "export_audit_log": "critical",
}


@pytest.mark.parametrize(("tool", "tier"), sorted(TIER_TOOLS.items()))
def test_tier_tools_land_in_their_tier_on_every_call(tool: str, tier: str) -> None:
    for arguments in demo_content.TOOLS_BY_NAME[tool].arguments:
        tokens = response_tokens(tool, arguments)
        assert DEFAULT_RISK_THRESHOLDS.classify(tokens).value == tier, (arguments, tokens)


def test_pretty_json_tool_is_mostly_whitespace_overhead() -> None:
    text = demo_content.inventory_pretty("ams")["content"][0]["text"]
    compact = json.dumps(json.loads(text), separators=(",", ":"))
    assert text_tokens(compact) < 0.7 * text_tokens(text)


def test_structured_tool_duplicates_its_text() -> None:
    result = demo_content.shipment_status(501)
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]


def test_image_tool_returns_a_real_png_of_the_requested_size() -> None:
    block = demo_content.render_chart(640, 200)["content"][0]
    assert block["mimeType"] == "image/png"
    image = Image.open(io.BytesIO(base64.b64decode(block["data"])))
    image.load()
    assert (image.format, image.size, image.mode) == ("PNG", (640, 200), "RGB")


def test_padded_document_trips_the_invisible_and_repetition_detectors() -> None:
    text = demo_content.policy_document()["content"][0]["text"]
    reasons = {finding.reason.value for finding in detect_padding(text, tokens=text_tokens(text))}
    assert {"invisible", "repetition"} <= reasons


@pytest.mark.parametrize(
    "tool", sorted(set(demo_content.TOOLS_BY_NAME) - {"policy_document", "render_chart"})
)
def test_other_tools_are_not_padding(tool: str) -> None:
    for block in demo_content.tool_result(tool, demo_content.TOOLS_BY_NAME[tool].arguments[0])["content"]:
        if block["type"] == "text":
            assert detect_padding(block["text"], tokens=text_tokens(block["text"])) == ()


def _row(output: str, side: str, tool: str) -> list[str]:
    section = output.split(f"== {side} side", 1)[1].split("\n==", 1)[0]
    line = next(line for line in section.splitlines() if re.match(rf"tools/call\s+{tool}\s", line))
    return re.split(r"\s{2,}", line.strip())


@pytest.mark.slow
def test_demo_prints_real_numbers_and_stops_everything(tmp_path: Path) -> None:
    require_sdk_configurator()
    result = demo.run(tmp_path)
    output = demo.render(result)
    logs = {log.name: log.read_text(errors="replace")[-3000:] for log in tmp_path.glob("*.log")}
    assert result.client_report["errors"] == [], logs
    assert demo.has_token_series(result.server_metrics), logs
    assert demo.has_token_series(result.client_metrics), logs
    calls = result.client_report["calls"]
    assert isinstance(calls, dict)
    for side in ("server", "client"):
        for tool, tier in TIER_TOOLS.items():
            row = _row(output, side, tool)
            assert row[3] == str(calls[tool])  # calls
            assert row[7] == f"{tier}:{calls[tool]}"  # risk tiers
        assert "formatting:" in _row(output, side, "inventory_pretty")[8]
        assert "duplicate:" in _row(output, side, "shipment_status")[8]
        assert "invisible:" in _row(output, side, "policy_document")[9]
    assert "budget crossings: warning 1, critical 1" in output.split("== client side")[1]
    # A few key series, one line per family, from the client's /metrics.
    series = output.split("== key series, client /metrics", 1)[1].split("\n==", 1)[0].split("\n", 1)[1]
    assert re.search(r'^mcp_tokens_payload_sum\{.*gen_ai_tool_name="export_audit_log"', series, re.MULTILINE)
    assert re.search(r'^mcp_tokens_responses_total\{.*mcp_tokens_risk="', series, re.MULTILINE)
    assert re.search(r"^mcp_client_operation_duration_seconds_count\{", series, re.MULTILINE)
    assert len(series.strip().splitlines()) <= 10
    assert "otel_scope" not in series
    # Both ran the report exporter too: its reports, written at exit, end the demo's output.
    assert set(result.reports) == {"server", "client"}, logs
    for side in ("server", "client"):
        operations = result.report_json(side)["operations"]
        by_tool = {o["target"]: o for o in operations if o["method"] == "tools/call"}
        for tool, tier in TIER_TOOLS.items():
            assert (by_tool[tool]["calls"], by_tool[tool]["risk"][tier]) == (calls[tool], calls[tool])
        assert by_tool["policy_document"]["padding"]["invisible"] == calls["policy_document"]
    assert result.report_json("client")["crossings"] == [
        {"side": "client", "level": "critical", "scopes": 1},
        {"side": "client", "level": "warning", "scopes": 1},
    ]
    section = output.split("== reports written at exit", 1)[1]
    for side in ("client", "server"):
        assert re.search(rf"^{side}: \d+ responses · [\d,]+ response tokens", section, re.MULTILINE)
        assert result.reports[side][".html"].lstrip().lower().startswith("<!doctype html")
    assert str(tmp_path / "client-report.html") in output.split("== where to look next ==", 1)[1]
    # Both processes are gone: nothing serves their metrics any more.
    assert not port_accepts(result.server_metrics_port)
    assert not port_accepts(result.client_metrics_port)
