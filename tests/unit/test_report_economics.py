# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The report's unused-tool tax, definition tokens per call and cost, in every format."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry.exporter.mcp_tokens.report.economics import Price
from opentelemetry.exporter.mcp_tokens.report.model import Report, build_report
from opentelemetry.exporter.mcp_tokens.report.prometheus import snapshot_from_text
from opentelemetry.exporter.mcp_tokens.report.render_html import render_html
from opentelemetry.exporter.mcp_tokens.report.render_json import render_json
from opentelemetry.exporter.mcp_tokens.report.render_markdown import render_markdown
from opentelemetry.exporter.mcp_tokens.report.render_terminal import render_text
from opentelemetry.exporter.mcp_tokens.report.settings import ReportSettings
from opentelemetry.exporter.mcp_tokens.textformat import money

# Twelve tools of 1,473 definition tokens; four are called, the other eight hold 984 tokens.
CALLED = {
    "search": (130, 3, 2400.0),
    "get": (121, 2, 800.0),
    "update": (119, 1, 150.0),
    "list": (119, 4, 6650.0),
}
NEVER = {f"admin_{i}": tokens for i, tokens in enumerate((160, 140, 130, 120, 118, 112, 104, 100))}
SERVER = "crm"


def exposition(side: str = "client") -> str:
    base = f'mcp_tokens_server_name="{SERVER}",mcp_tokens_side="{side}"'
    lines = ["# TYPE mcp_tokens_tool_definition gauge"]
    for tool, tokens in {**{t: v[0] for t, v in CALLED.items()}, **NEVER, "retired": 0}.items():
        # Two processes export the same server: a gauge is the listing's value, never their sum.
        for instance in ("a", "b"):
            labels = f'{base},gen_ai_tool_name="{tool}",instance="{instance}"'
            lines.append(f"mcp_tokens_tool_definition{{{labels}}} {tokens}")
    lines.append("# TYPE mcp_tokens_payload histogram")
    for tool, (_, calls, tokens) in CALLED.items():
        labels = (
            f'{base},gen_ai_tool_name="{tool}",mcp_method_name="tools/call",mcp_tokens_direction="response"'
        )
        lines += [
            f'mcp_tokens_payload_bucket{{{labels},le="+Inf"}} {calls}',
            f"mcp_tokens_payload_count{{{labels}}} {calls}",
            f"mcp_tokens_payload_sum{{{labels}}} {tokens}",
        ]
    listing = f'{base},mcp_method_name="tools/list",mcp_tokens_direction="response"'
    lines += [
        f'mcp_tokens_payload_bucket{{{listing},le="+Inf"}} 1',
        f"mcp_tokens_payload_count{{{listing}}} 1",
        f"mcp_tokens_payload_sum{{{listing}}} 1473",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def report() -> Report:
    return build_report(snapshot_from_text(exposition()), price=Price(3.0, "USD"))


def test_unused_tool_tax_counts_listed_called_and_never_called_tokens(report: Report) -> None:
    (unused,) = report.unused
    assert (unused.listed, unused.called, len(unused.never_called)) == (12, 4, 8)
    assert (unused.definition_tokens, unused.never_called_tokens) == (1473, 984)
    assert unused.summary() == "8 of 12, 984 of 1,473 definition tokens (67%)"
    assert [t.tool for t in unused.never_called] == list(NEVER)  # most tokens first


def test_json_carries_the_same_numbers(report: Report) -> None:
    document = json.loads(render_json(report))
    (unused,) = document["unused_tools"]
    assert {k: v for k, v in unused.items() if k != "never_called"} == {
        "side": "client",
        "server": SERVER,
        "tools_listed": 12,
        "tools_called": 4,
        "tools_never_called": 8,
        "definition_tokens": 1473,
        "never_called_tokens": 984,
        "never_called_share": round(984 / 1473, 6),
    }
    assert unused["never_called"] == [{"tool": t, "tokens": v} for t, v in NEVER.items()]
    per_call = {d["tool"]: (d["calls"], d["tokens_per_call"]) for d in document["definitions"]}
    assert per_call["search"] == (3, round(130 / 3, 6))
    assert per_call["admin_0"] == (0, None)
    assert "retired" not in per_call
    cost = document["cost"]
    responses = sum(v[2] for v in CALLED.values())
    assert (cost["price_per_mtok"], cost["currency"]) == (3, "USD")
    assert cost["servers"] == [
        {
            "side": "client",
            "server": SERVER,
            "response_tokens": responses,
            "response_cost": round(responses * 3 / 1e6, 6),
            "definition_tokens": 1473,
            "definition_cost_per_conversation": round(1473 * 3 / 1e6, 6),
            "never_called_cost_per_conversation": round(984 * 3 / 1e6, 6),
        }
    ]
    search = next(o for o in document["operations"] if o["target"] == "search")
    assert search["cost"] == round(2400 * 3 / 1e6, 6)


def test_every_format_says_it_in_words(report: Report) -> None:
    sentence = (
        f"Tools listed but never called (client, {SERVER}): 8 of 12, 984 of 1,473 definition tokens (67%)"
    )
    for text in (render_text(report, 100, width=250), render_markdown(report, 100), render_html(report, 100)):
        assert sentence in text
        assert "Cost as model input at 3 USD per million tokens" in text
        assert money(1473 * 3 / 1e6, "USD") in text  # definitions per conversation: 0.00442 USD


def test_without_a_price_there_is_no_cost() -> None:
    report = build_report(snapshot_from_text(exposition()))
    assert json.loads(render_json(report))["cost"] is None
    assert "Cost as model input" not in render_text(report, 100)


def test_price_settings(caplog: pytest.LogCaptureFixture) -> None:
    env = {
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_PRICE_PER_MTOK": "2.5",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_CURRENCY": "EUR",
    }
    assert ReportSettings.from_env(env, pid=1).price == Price(2.5, "EUR")
    assert ReportSettings.from_env(
        {"OTEL_EXPORTER_MCP_TOKENS_REPORT_PRICE_PER_MTOK": "3"}, pid=1
    ).price == Price(3.0)
    with caplog.at_level(logging.WARNING):
        for bad in ("-1", "nan", "inf", "three"):
            assert (
                ReportSettings.from_env({"OTEL_EXPORTER_MCP_TOKENS_REPORT_PRICE_PER_MTOK": bad}, pid=1).price
                is None
            )
    assert "no cost shown" in caplog.text


@pytest.mark.parametrize(
    ("amount", "text"),
    [
        (0.0, "0.00 USD"),
        (0.00442, "0.00442 USD"),
        (0.0123, "0.0123 USD"),
        (4.5678, "4.57 USD"),
        (1234.5, "1,234.50 USD"),
    ],
)
def test_money_keeps_three_significant_digits_below_one(amount: float, text: str) -> None:
    assert money(amount, "USD") == text
