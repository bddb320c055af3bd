# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Alert conventions (monitoring mixins), and the Prometheus, Grafana and runbook forms agree."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings
from opentelemetry.exporter.mcp_tokens.dashboards.definitions import AlertDefinition, alerts
from opentelemetry.exporter.mcp_tokens.dashboards.grafana_alerting import DATASOURCE_UID_ENV
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds

from .conftest import DASHBOARDS
from .lint import panels

ALERTS = alerts(GeneratorSettings())
REQUIRED_ALERTS = {
    "McpToolResponsesCritical",  # a tool whose responses are critical
    "McpToolResponsesHigh",  # a tool trending high
    "McpPaddingDetected",
    "McpBudgetCriticalCrossings",
    "McpToolDefinitionTaxHigh",  # definitions alone exceed a share of the window
    "McpTokensAnalysisSkipped",
    "McpTokensTargetDown",  # no data from a scraped target
}


@functools.cache
def _yaml(relative: str) -> Any:
    return yaml.safe_load((DASHBOARDS / relative).read_text(encoding="utf-8"))


def _prometheus_rules() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for r in _yaml("prometheus/alerts.yaml")["groups"][0]["rules"]}


def _grafana_rules() -> dict[str, dict[str, Any]]:
    return {r["title"]: r for r in _yaml("grafana-alerting/mcp-tokens-alerts.yaml")["groups"][0]["rules"]}


def _dashboards() -> dict[str, dict[str, Any]]:
    loaded = (json.loads(p.read_text(encoding="utf-8")) for p in (DASHBOARDS / "grafana").glob("*.json"))
    return {d["uid"]: d for d in loaded}


def test_the_issues_alerts_exist_with_unique_names() -> None:
    names = [a.name for a in ALERTS]
    assert len(names) == len(set(names))
    assert set(names) >= REQUIRED_ALERTS


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a.name)
def test_alert_follows_mixin_conventions(alert: AlertDefinition) -> None:
    assert re.fullmatch(r"([A-Z]+[a-z0-9]+)+", alert.name)
    assert alert.name.startswith("Mcp")
    assert alert.severity in {"critical", "warning", "info"}
    assert re.fullmatch(r"\d+[smh]", alert.for_)
    assert re.fullmatch(r"[A-Z].+\.", alert.summary)
    assert "{{" not in alert.summary
    assert "{{ $labels.job }}" in alert.description
    if alert.name != "McpTokensTargetDown":  # its value is always 0 (up)
        assert "$value" in alert.description
    assert alert.meaning and alert.confirm and alert.actions


def test_only_critical_tool_responses_page() -> None:
    assert [a.name for a in ALERTS if a.severity == "critical"] == ["McpToolResponsesCritical"]


def test_thresholds_follow_the_instrumentations_risk_tiers() -> None:
    by_name = {a.name: a for a in ALERTS}
    assert by_name["McpToolResponsesCritical"].threshold == RiskThresholds().high
    assert by_name["McpToolResponsesHigh"].threshold == RiskThresholds().medium
    assert by_name["McpToolDefinitionTaxHigh"].threshold == 20_000


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a.name)
def test_prometheus_rule_is_query_comparison_threshold(alert: AlertDefinition) -> None:
    rule = _prometheus_rules()[alert.name]
    query, comparison = rule["expr"].rsplit("\n", 1)
    assert query.strip("()") == alert.query.strip("()")
    assert comparison == f"{alert.comparison} {alert.threshold:g}"
    assert rule["for"] == alert.for_
    assert rule["labels"] == {"severity": alert.severity}
    assert rule["annotations"] == {
        "summary": alert.summary,
        "description": alert.description,
        "runbook_url": f"dashboards/runbook.md#{alert.name.lower()}",
    }


@pytest.mark.parametrize("alert", ALERTS, ids=lambda a: a.name)
def test_grafana_twin_evaluates_the_same_query_and_threshold(alert: AlertDefinition) -> None:
    rule = _grafana_rules()[alert.name]
    query, threshold = rule["data"]
    assert query["datasourceUid"] == f"${DATASOURCE_UID_ENV}"
    assert query["model"]["expr"] == alert.query
    assert query["model"]["instant"] is True
    assert threshold["datasourceUid"] == "__expr__"
    assert threshold["model"]["expression"] == "A"
    evaluator = threshold["model"]["conditions"][0]["evaluator"]
    assert evaluator == {"type": {">": "gt", "<": "lt"}[alert.comparison], "params": [alert.threshold]}
    assert rule["condition"] == "B"
    assert rule["for"] == alert.for_
    assert rule["labels"] == {"severity": alert.severity}
    annotations = rule["annotations"]
    assert annotations["summary"] == alert.summary
    assert annotations["description"] == alert.description.replace("$value", "$values.A.Value")
    assert "$value " not in annotations["description"] and "$value |" not in annotations["description"]


def test_grafana_rule_uids_are_valid_and_unique() -> None:
    uids = [r["uid"] for r in _grafana_rules().values()]
    assert len(set(uids)) == len(uids) == len(ALERTS)
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid) for uid in uids)


def test_grafana_rules_link_to_the_panel_that_confirms_them() -> None:
    dashboards = _dashboards()
    for alert in ALERTS:
        annotations = _grafana_rules()[alert.name]["annotations"]
        dashboard = dashboards[annotations["__dashboardUid__"]]
        panel = next(p for p in panels(dashboard) if str(p["id"]) == annotations["__panelId__"])
        assert panel["title"] == alert.panel_title


def test_runbook_has_a_section_per_alert_and_the_remedies() -> None:
    runbook = (DASHBOARDS / "runbook.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (\S+)$", runbook, flags=re.MULTILINE)
    assert [a.name for a in ALERTS] == [h for h in headings if h.startswith("Mcp")]
    for remedy in (
        "agentLimit",
        "Truncate with a notice",
        "compact JSON",
        "Split the tool",
        "structuredContent",
    ):
        assert remedy in runbook


def _italic_references(text: str) -> list[str]:
    return re.findall(r"\*([^*]+)\*", text)


def test_panel_references_in_prose_name_real_panels() -> None:
    dashboards = _dashboards()
    titles = {d["title"] for d in dashboards.values()}
    titles |= {p["title"] for d in dashboards.values() for p in panels(d)}
    prose = [a.confirm for a in ALERTS] + [action for a in ALERTS for action in a.actions]
    prose += [p.get("description", "") for d in dashboards.values() for p in panels(d)]
    for text in prose:
        for reference in _italic_references(text):
            assert reference in titles, f"{reference!r} is not a dashboard or panel title"
