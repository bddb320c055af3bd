# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""all_expressions() lists every query of every panel and rule, ready for a live Prometheus."""

from __future__ import annotations

import json
import re

from opentelemetry.exporter.mcp_tokens.dashboards import all_expressions, substitute
from opentelemetry.exporter.mcp_tokens.dashboards.definitions import alerts
from opentelemetry.exporter.mcp_tokens.dashboards.recording_rules import recording_rules
from opentelemetry.exporter.mcp_tokens.dashboards.settings import GeneratorSettings

from .conftest import DASHBOARDS
from .lint import panels


def test_lists_every_panel_query_variable_rule_and_grafana_alert() -> None:
    expected = set()
    for path in sorted((DASHBOARDS / "grafana").glob("*.json")):
        dashboard = json.loads(path.read_text(encoding="utf-8"))
        expected |= {t["expr"] for p in panels(dashboard) for t in p.get("targets", [])}
        expected |= {
            re.sub(r"^label_values\((.+), \w+\)$", r"\1", v["query"])
            for v in dashboard["templating"]["list"]
            if v["type"] == "query"
        }
    settings = GeneratorSettings()
    expected |= {r.expr for r in recording_rules(settings)}
    expected |= {a.expr for a in alerts(settings)} | {a.query for a in alerts(settings)}
    listed = all_expressions()
    assert {e.expr for e in listed} == expected
    assert len({e.source for e in listed}) == len(listed)


def test_substitution_leaves_no_grafana_variable() -> None:
    for expression in all_expressions():
        assert "$" not in expression.substituted(), expression.source


def test_substitution_uses_given_values_and_fixed_intervals() -> None:
    expr = 'rate(x{job=~"$job", gen_ai_tool_name=~"${gen_ai_tool_name}"}[$__rate_interval]) / $__range'
    assert substitute(expr, {"gen_ai_tool_name": "search"}) == (
        'rate(x{job=~".*", gen_ai_tool_name=~"search"}[1m]) / 1h'
    )
    assert substitute("${job:regex}", {"job": "mcp"}) == "mcp"
    assert substitute("[$__rate_interval]", {"__rate_interval": "15s"}) == "[15s]"
