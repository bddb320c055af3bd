# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Rules, alerts and every PromQL expression checked by the real promtool (and amtool)."""

from __future__ import annotations

import functools
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings, all_expressions, render_all
from opentelemetry.exporter.mcp_tokens.dashboards.definitions import alerts
from opentelemetry.exporter.mcp_tokens.dashboards.prometheus_rules import alert_rule, render_alerts
from opentelemetry.exporter.mcp_tokens.dashboards.recording_rules import recording_rules
from opentelemetry.exporter.mcp_tokens.dashboards.settings import AlertTiming
from opentelemetry.exporter.mcp_tokens.dashboards.yamltext import dump
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds

from .conftest import DASHBOARDS, PromtoolRunner

UNIT_TESTS = sorted((DASHBOARDS / "tests").glob("*.yaml"))


def _ok(result: Any) -> None:
    assert result.returncode == 0, f"{result.args}\n{result.stdout}\n{result.stderr}"


def test_rule_files_pass_promtool_check(promtool: PromtoolRunner) -> None:
    result = promtool(["check", "rules", str(DASHBOARDS / "prometheus" / "rules.yaml")])
    _ok(result)
    assert f"SUCCESS: {len(recording_rules(GeneratorSettings()))} rules found" in result.stdout
    result = promtool(["check", "rules", str(DASHBOARDS / "prometheus" / "alerts.yaml")])
    _ok(result)
    assert f"SUCCESS: {len(alerts(GeneratorSettings()))} rules found" in result.stdout


def test_promtool_unit_tests_pass(promtool: PromtoolRunner) -> None:
    _ok(promtool(["test", "rules", *map(str, UNIT_TESTS)]))


def _write_rule_file(path: Path, exprs: list[str]) -> None:
    rules = [{"record": f"mcp_tokens_check:expr_{i}", "expr": expr} for i, expr in enumerate(exprs)]
    path.write_text(dump({"groups": [{"name": "parse-check", "rules": rules}]}), encoding="utf-8")


def test_every_dashboard_and_alert_expression_parses(promtool: PromtoolRunner, tmp_path: Path) -> None:
    # There is no PromQL parser for Python: promtool parses each expression as a rule.
    expressions = all_expressions()
    rule_file = tmp_path / "expressions.yaml"
    _write_rule_file(rule_file, [e.substituted() for e in expressions])
    result = promtool(["check", "rules", str(rule_file)])
    _ok(result)
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout


def test_the_expression_parse_check_can_fail(promtool: PromtoolRunner, tmp_path: Path) -> None:
    rule_file = tmp_path / "broken.yaml"
    _write_rule_file(rule_file, ['sum by (job) (rate(mcp_tokens_payload_sum{job=~".*"}[1m])'])
    result = promtool(["check", "rules", str(rule_file)])
    assert result.returncode != 0
    assert "parse error" in result.stdout + result.stderr


@functools.cache
def _cases() -> dict[str, list[tuple[str, int, bool]]]:
    """alertname -> (test name, eval time in seconds, fires?) from the promtool unit tests."""
    found: dict[str, list[tuple[str, int, bool]]] = defaultdict(list)
    for path in UNIT_TESTS:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
        for test in document["tests"]:
            for case in test.get("alert_rule_test", []):
                fires = bool(case.get("exp_alerts"))
                found[case["alertname"]].append(
                    (f"{path.name}: {test['name']}", _seconds(case["eval_time"]), fires)
                )
    return found


def _seconds(duration: str) -> int:
    value, unit = re.fullmatch(r"(\d+)([smh])", duration).groups()  # type: ignore[union-attr]
    return int(value) * {"s": 1, "m": 60, "h": 3600}[unit]


@pytest.mark.parametrize("alert", alerts(GeneratorSettings()), ids=lambda a: a.name)
def test_every_alert_has_firing_silent_and_for_boundary_cases(alert: Any) -> None:
    cases = _cases()[alert.name]
    assert any(fires for _, _, fires in cases), f"{alert.name}: no test where it fires"
    assert any(not fires for _, _, fires in cases), f"{alert.name}: no test where it stays silent"
    # Just before the `for:` boundary it is pending (silent), one evaluation later it fires.
    boundary = {
        (name, t)
        for name, t, fires in cases
        if not fires and any(n == name and t2 == t + 60 and f for n, t2, f in cases)
    }
    assert boundary, f"{alert.name}: no silent case exactly one evaluation before a firing one"


def test_firing_cases_assert_the_full_annotations() -> None:
    for path in UNIT_TESTS:
        for test in yaml.safe_load(path.read_text(encoding="utf-8"))["tests"]:
            for case in test.get("alert_rule_test", []):
                for expected in case.get("exp_alerts") or []:
                    assert set(expected["exp_annotations"]) == {"summary", "description", "runbook_url"}, path


def test_unit_tests_fail_against_alerts_with_other_thresholds(
    promtool: PromtoolRunner, tmp_path: Path
) -> None:
    # The committed tests pin the defaults: regenerating with a higher critical threshold
    # must make them fail, or they would not be testing the thresholds at all.
    settings = GeneratorSettings(risk=RiskThresholds(1000, 4000, 20000))
    for relative, text in render_all(settings).items():
        target = tmp_path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    shutil.copytree(DASHBOARDS / "tests", tmp_path / "tests")
    result = promtool(["test", "rules", str(tmp_path / "tests" / "tool-responses.yaml")])
    assert result.returncode != 0
    assert "McpToolResponsesCritical" in result.stdout + result.stderr


def test_alertmanager_example_routes_critical_to_the_pager(amtool: PromtoolRunner) -> None:
    config = str(DASHBOARDS / "alertmanager" / "alertmanager.example.yaml")
    _ok(amtool(["check-config", config]))
    for labels, receiver in (
        (["severity=critical", "alertname=McpToolResponsesCritical"], "mcp-tokens-pager"),
        (["severity=warning", "alertname=McpPaddingDetected"], "mcp-tokens-ticket"),
        (["severity=info", "alertname=McpBudgetWarningCrossings"], "mcp-tokens-null"),
    ):
        _ok(
            amtool(
                [
                    "config",
                    "routes",
                    "test",
                    f"--config.file={config}",
                    f"--verify.receivers={receiver}",
                    *labels,
                ]
            )
        )


def _render(template: str, labels: dict[str, str], value: str) -> str:
    """The two template forms our annotations use: {{ $labels.x }} and a printf'd $value."""
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m.group(1)], template)
    return re.sub(r"\{\{ \$value \| printf \"[^\"]+\" \}\}", value, text)


def test_fast_timing_fires_the_critical_alert_within_seconds(
    promtool: PromtoolRunner, tmp_path: Path
) -> None:
    # What a live end-to-end test uses: 1 s evaluations, no for:, a 30 s window.
    settings = GeneratorSettings(timing=AlertTiming.fast())
    (tmp_path / "alerts.yaml").write_text(render_alerts(settings), encoding="utf-8")
    labels = {
        "job": "demo",
        "mcp_tokens_side": "server",
        "mcp_tokens_server_name": "demo",
        "gen_ai_tool_name": "big",
    }
    selector = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    selector += ', mcp_method_name="tools/call", mcp_tokens_direction="response"'
    critical = next(a for a in alerts(settings) if a.name == "McpToolResponsesCritical")
    annotations = alert_rule(critical, settings)["annotations"]
    annotations["description"] = _render(annotations["description"], labels, "15965")
    test = {
        "rule_files": ["alerts.yaml"],
        "evaluation_interval": "1s",
        "tests": [
            {
                "interval": "1s",
                "input_series": [
                    {"series": f'mcp_tokens_payload_bucket{{{selector}, le="{le}"}}', "values": values}
                    for le, values in (("8000", "0x30"), ("16384", "0+1x30"), ("+Inf", "0+1x30"))
                ],
                "alert_rule_test": [
                    {"eval_time": "0s", "alertname": critical.name, "exp_alerts": []},
                    {
                        "eval_time": "2s",
                        "alertname": critical.name,
                        "exp_alerts": [
                            {"exp_labels": {"severity": "critical", **labels}, "exp_annotations": annotations}
                        ],
                    },
                ],
            }
        ],
    }
    (tmp_path / "fast.yaml").write_text(dump(test), encoding="utf-8")
    _ok(promtool(["test", "rules", str(tmp_path / "fast.yaml")]))
