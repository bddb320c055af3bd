# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Every PromQL expression the generated files contain, ready to send to Prometheus.

Dashboard queries hold Grafana variables (``$job``, ``$__rate_interval``); `substitute`
replaces them with concrete values, the way the linter and a live check need them:
intervals by fixed durations and label variables by a regex (``.*`` unless given).
Template-variable queries (``label_values(selector, label)``) contribute their selector.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .definitions import alerts
from .economics import CURRENCY_VARIABLE, DEFAULT_CURRENCY, DEFAULT_PRICE_PER_MTOK, PRICE_VARIABLE
from .grafana_dashboards import dashboards
from .recording_rules import recording_rules
from .settings import GeneratorSettings

GRAFANA_INTERVALS: Mapping[str, str] = {
    "__rate_interval": "1m",
    "__interval": "1m",
    "__range": "1h",
}
# Free-text variables hold values, not label regexes: they get their defaults.
TEXT_VARIABLES: Mapping[str, str] = {
    PRICE_VARIABLE: DEFAULT_PRICE_PER_MTOK,
    CURRENCY_VARIABLE: DEFAULT_CURRENCY,
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")
_LABEL_VALUES = re.compile(r"^label_values\((?P<selector>.+),\s*\w+\)$", re.DOTALL)


@dataclass(frozen=True)
class PromQLExpression:
    """One expression and where it lives (file, panel or rule, query ref)."""

    source: str
    expr: str

    def substituted(self, values: Mapping[str, str] | None = None) -> str:
        return substitute(self.expr, values)


def substitute(expr: str, values: Mapping[str, str] | None = None, default: str = ".*") -> str:
    """`expr` with Grafana's interval variables and the dashboard's variables replaced."""
    chosen = {**GRAFANA_INTERVALS, **TEXT_VARIABLES, **(values or {})}

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return chosen.get(name, default)

    return _VARIABLE.sub(replace, expr)


def dashboard_expressions(settings: GeneratorSettings) -> list[PromQLExpression]:
    found = []
    for path, dashboard in dashboards(settings).items():
        model = dashboard.to_json()
        for variable in model["templating"]["list"]:
            match = _LABEL_VALUES.match(str(variable.get("query", "")))
            if variable["type"] == "query" and match:
                found.append(PromQLExpression(f"{path} variable {variable['name']}", match.group("selector")))
        for panel in model["panels"]:
            for target in panel.get("targets", []):
                source = f"{path} panel {panel['id']} {panel['title']!r} query {target['refId']}"
                found.append(PromQLExpression(source, target["expr"]))
    return found


def rule_expressions(settings: GeneratorSettings) -> list[PromQLExpression]:
    found = [
        PromQLExpression(f"prometheus/rules.yaml record {rule.record} {rule.labels}", rule.expr)
        for rule in recording_rules(settings)
    ]
    for alert in alerts(settings):
        found.append(PromQLExpression(f"prometheus/alerts.yaml alert {alert.name}", alert.expr))
        found.append(
            PromQLExpression(
                f"grafana-alerting/mcp-tokens-alerts.yaml rule {alert.name} query A", alert.query
            )
        )
    return found


def all_expressions(settings: GeneratorSettings | None = None) -> list[PromQLExpression]:
    """Every dashboard, recording-rule, alert and Grafana-alert expression."""
    settings = settings or GeneratorSettings()
    return [*dashboard_expressions(settings), *rule_expressions(settings)]
