# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The recommendation table: each rule fires on its condition, alone, with a readable message."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.cli import rules
from opentelemetry.exporter.mcp_tokens.cli.rules import ServerFacts, Severity, ToolFacts

HEALTHY = ToolFacts(
    tool="search",
    definition_tokens=180,
    description_tokens=40,
    params=2,
    has_output_schema=True,
    bound="bounded",
    risk="low",
    worst_case_tokens=400,
    structured_tokens=150,
    output_fields=6,
    unbounded_collection="",
    uncapped_value="",
    depth=2,
    deepest_path="output $.items",
    largest_enum=4,
    largest_enum_path="input $.sort",
    largest_enum_tokens=12,
    text_copy=True,
)

CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "unbounded-collection",
        {"unbounded_collection": "$.items, $.tags", "bound": "unbounded"},
        "$.items, $.tags",
    ),
    ("no-size-cap", {"uncapped_value": "$.body", "bound": "unbounded"}, "$.body"),
    ("worst-case-critical", {"risk": "critical", "worst_case_tokens": 12_000}, "12,000 tokens (critical)"),
    ("worst-case-high", {"risk": "high", "worst_case_tokens": 6_000}, "6,000 tokens (high)"),
    (
        "unknown-bound",
        {"has_output_schema": False, "bound": "unknown", "risk": None, "structured_tokens": None},
        "outputSchema",
    ),
    (
        "unknown-bound-open-world",
        {
            "has_output_schema": False,
            "bound": "unknown",
            "risk": None,
            "structured_tokens": None,
            "open_world": True,
        },
        "open-world tool (openWorldHint)",
    ),
    ("long-description", {"description_tokens": 301}, "301 tokens"),
    ("huge-enum", {"largest_enum": 33, "largest_enum_tokens": 140}, "input $.sort lists 33 enum values"),
    ("deep-schema", {"depth": 6}, "6 levels deep (at output $.items)"),
    ("heavy-definition", {"definition_tokens": 501, "params": 1}, "501 tokens for 1 parameter(s) (over 500)"),
    ("many-output-fields", {"output_fields": 16}, "16 fields"),
    ("many-parameters", {"params": 16, "definition_tokens": 300}, "16 parameters"),
    ("duplicated-structured-content", {"structured_tokens": 201}, "201 tokens twice"),
    (
        "duplicated-content-measured",
        {"measured": True, "measured_tokens": 300, "duplicate_tokens": 120},
        "120",
    ),
    (
        "formatting-measured",
        {"measured": True, "measured_tokens": 300, "formatting_tokens": 31},
        "31 of the 300",
    ),
    (
        "padding-measured",
        {"measured": True, "measured_tokens": 300, "padding_findings": 2, "padding_reasons": "invisible"},
        "(invisible)",
    ),
    ("exceeds-declared-bound", {"measured": True, "measured_tokens": 401}, "(401 tokens) exceeds"),
    ("exceeds-host-cap", {"host_cap": 399}, "400 tokens, over a host's 399-token result cap"),
    (
        "measured-exceeds-host-cap",
        {"measured": True, "measured_tokens": 350, "host_cap": 300, "worst_case_tokens": None},
        "350 tokens, over a host's 300-token result cap",
    ),
    (
        "measured-risk",
        {"measured": True, "measured_tokens": 5000, "measured_risk": "high", "worst_case_tokens": 9000},
        "5,000 tokens (high)",
    ),
]


def test_a_healthy_tool_gets_no_advice() -> None:
    assert rules.evaluate_tool(HEALTHY) == ()


@pytest.mark.parametrize(("rule_id", "changes", "fragment"), CASES, ids=[case[0] for case in CASES])
def test_each_rule_fires_alone(rule_id: str, changes: dict[str, Any], fragment: str) -> None:
    found = rules.evaluate_tool(dataclasses.replace(HEALTHY, **changes))
    assert [r.rule for r in found] == [rule_id]
    assert fragment in found[0].message
    assert found[0].tool == "search"


def test_every_tool_rule_has_a_case_and_a_unique_id() -> None:
    ids = [rule.id for rule in (*rules.TOOL_RULES, *rules.SERVER_RULES)]
    assert len(ids) == len(set(ids))
    assert {case[0] for case in CASES} == {rule.id for rule in rules.TOOL_RULES}


def test_thresholds_are_exclusive() -> None:
    at_limits = dataclasses.replace(
        HEALTHY,
        description_tokens=300,
        largest_enum=32,
        depth=5,
        output_fields=15,
        definition_tokens=500,
        params=1,
    )
    assert rules.evaluate_tool(at_limits) == ()


def test_unbounded_worst_cases_say_they_use_assumed_sizes() -> None:
    facts = dataclasses.replace(
        HEALTHY,
        risk="critical",
        worst_case_tokens=20_000,
        nominal_note=" at the assumed sizes of its unbounded parts",
    )
    (recommendation,) = rules.evaluate_tool(facts)
    assert "20,000 tokens at the assumed sizes of its unbounded parts (critical)" in recommendation.message


def test_recommendations_come_most_severe_first() -> None:
    facts = dataclasses.replace(
        HEALTHY, has_output_schema=False, risk="critical", worst_case_tokens=9_000, depth=9
    )
    assert [r.severity for r in rules.evaluate_tool(facts)] == [
        Severity.ERROR,
        Severity.WARNING,
        Severity.INFO,
    ]


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (10_000, []),
        (10_001, ["definition-tax-high"]),
        (20_000, ["definition-tax-high"]),
        (20_001, ["definition-tax-critical"]),
    ],
)
def test_definition_tax_against_the_context_window(tokens: int, expected: list[str]) -> None:
    found = rules.evaluate_server(ServerFacts(tools=12, definition_tokens=tokens, context_window=200_000))
    assert [r.rule for r in found] == expected
    if found:
        assert f"{tokens:,} tokens" in found[0].message
        assert "200,000-token window" in found[0].message
        assert found[0].tool is None


def test_rule_table_lists_every_rule() -> None:
    table = rules.rule_table()
    assert len(table) == len(rules.TOOL_RULES) + len(rules.SERVER_RULES)
    assert all(severity in ("info", "warning", "error") for _, severity, _ in table)
