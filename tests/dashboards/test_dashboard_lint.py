# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The dashboards pass the dashboard-linter-style rules, and each rule can fail."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from .conftest import DASHBOARDS
from .lint import lint, panels, target_problems

DASHBOARD_FILES = sorted((DASHBOARDS / "grafana").glob("*.json"))


def _load(name: str = "mcp-tokens-overview.json") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DASHBOARDS / "grafana" / name).read_text(encoding="utf-8"))
    return data


def _first_panel(dashboard: dict[str, Any], kind: str = "timeseries") -> dict[str, Any]:
    return next(p for p in panels(dashboard) if p["type"] == kind)


def test_four_dashboards_are_committed() -> None:
    assert [p.name for p in DASHBOARD_FILES] == [
        "mcp-tokens-budget.json",
        "mcp-tokens-economics.json",
        "mcp-tokens-overview.json",
        "mcp-tokens-tool.json",
    ]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_committed_dashboard_is_lint_clean(path: Any) -> None:
    assert lint(json.loads(path.read_text(encoding="utf-8"))) == []


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_panel_describes_what_to_do(path: Any) -> None:
    # "What it shows and what to do when it looks bad": at least two sentences.
    for panel in panels(json.loads(path.read_text(encoding="utf-8"))):
        if panel["type"] != "row":
            assert panel["description"].count(". ") + panel["description"].count(": ") >= 1, panel["title"]


def test_dashboard_uids_are_unique_and_stable() -> None:
    uids = [json.loads(p.read_text(encoding="utf-8"))["uid"] for p in DASHBOARD_FILES]
    assert sorted(uids) == [
        "mcp-tokens-budget",
        "mcp-tokens-economics",
        "mcp-tokens-overview",
        "mcp-tokens-tool",
    ]


def _broken(mutate: Any) -> list[str]:
    dashboard = copy.deepcopy(_load())
    mutate(dashboard)
    return lint(dashboard)


def test_lint_flags_a_hard_coded_datasource_uid() -> None:
    def mutate(d: dict[str, Any]) -> None:
        _first_panel(d)["targets"][0]["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}

    assert any("does not use ${datasource}" in p for p in _broken(mutate))
    assert any("hard-coded datasource" in p for p in _broken(mutate))


def test_lint_flags_inputs_and_ds_placeholders() -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["__inputs"] = [{"name": "DS_PROMETHEUS", "type": "datasource", "pluginId": "prometheus"}]
        _first_panel(d)["datasource"] = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

    problems = _broken(mutate)
    assert any("__inputs" in p for p in problems)
    assert any("hard-coded datasource" in p for p in problems)


def test_lint_flags_a_missing_datasource_variable() -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["templating"]["list"] = [v for v in d["templating"]["list"] if v["type"] != "datasource"]

    assert "expected one datasource variable, found 0" in _broken(mutate)


def test_lint_flags_a_single_select_job_variable() -> None:
    def mutate(d: dict[str, Any]) -> None:
        next(v for v in d["templating"]["list"] if v["name"] == "job")["multi"] = False

    assert any("job variable must be multi-select" in p for p in _broken(mutate))


def test_lint_flags_missing_description_unit_and_duplicate_ids() -> None:
    def mutate(d: dict[str, Any]) -> None:
        first, second = [p for p in panels(d) if p["type"] == "timeseries"][:2]
        first["description"] = " "
        first["fieldConfig"]["defaults"]["unit"] = "tokens"
        second["id"] = first["id"]

    problems = _broken(mutate)
    assert any("has no description" in p for p in problems)
    assert any("invalid unit: 'tokens'" in p for p in problems)
    assert any("duplicate panel ids" in p for p in problems)


def test_lint_flags_overlapping_panels() -> None:
    def mutate(d: dict[str, Any]) -> None:
        first, second = [p for p in panels(d) if p["type"] == "timeseries"][:2]
        second["gridPos"] = dict(first["gridPos"])

    assert any("overlaps" in p for p in _broken(mutate))


def test_lint_flags_unused_and_undefined_variables() -> None:
    def mutate(d: dict[str, Any]) -> None:
        d["templating"]["list"].append(dict(d["templating"]["list"][1], name="orphan"))
        _first_panel(d)["targets"][0]["expr"] += " * on() group_left() vector($nowhere)"

    problems = _broken(mutate)
    assert "variable 'orphan' is defined but never used" in problems
    assert any("undefined variable $nowhere" in p for p in problems)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('sum(rate(mcp_tokens_responses_total{job=~"$job"}[5m]))', "is fixed"),
        ('sum(rate(mcp_tokens_responses_total{job=~"$job"}[$__interval]))', "must use [$__rate_interval]"),
        ('sum(mcp_tokens_responses_total{job=~"$job"})', "outside rate()/increase()"),
        ('sum(rate(mcp_tokens_payload_sum{mcp_tokens_side="server"}[$__rate_interval]))', "no job"),
        ("max(mcp_tokens_tool_definition)", "no job"),
        ("", "empty query"),
    ],
)
def test_target_rules_flag_bad_queries(expr: str, expected: str) -> None:
    assert any(expected in p for p in target_problems(expr)), target_problems(expr)


def test_target_rules_accept_the_house_style() -> None:
    expr = (
        'sum by (le) (increase(mcp_tokens_padding_detections_total{job=~"$job"}[$__range]))'
        ' / sum(rate(mcp_tokens_payload_sum{job=~"$job", mcp_tokens_side=~"$mcp_tokens_side"}'
        "[$__rate_interval]))"
    )
    assert target_problems(expr) == []
