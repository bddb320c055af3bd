# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The alerts as Grafana-managed alert rules, in Grafana's file-provisioning shape.

Each rule evaluates the alert's query as data query A against the Prometheus data
source whose uid Grafana reads from the environment variable
``MCP_TOKENS_PROMETHEUS_DS_UID`` when it loads the file (provisioning files interpolate
``$VAR`` everywhere except annotations and query models, which is why the annotations'
``{{ $labels.x }}`` templates are safe). Expression B compares A with the threshold.
Prometheus' ``$value`` becomes ``$values.A.Value``. With this file alone, Grafana
alerting pages on critical tools without Prometheus rules or an Alertmanager.
"""

from __future__ import annotations

import re
from typing import Any

from . import yamltext
from .definitions import AlertDefinition, alerts
from .grafana_dashboards import dashboards
from .prometheus_rules import HEADER, describe_thresholds
from .settings import GeneratorSettings

DATASOURCE_UID_ENV = "MCP_TOKENS_PROMETHEUS_DS_UID"
FOLDER = "MCP tokens"
GROUP = "mcp-tokens"
EVALUATION_INTERVAL = "1m"
QUERY_RANGE_SECONDS = 600


def grafana_uid(alert: AlertDefinition) -> str:
    """A stable rule uid (Grafana: at most 40 of ``[A-Za-z0-9_-]``)."""
    uid = re.sub(r"(?<!^)(?=[A-Z])", "-", alert.name).lower()
    if len(uid) > 40:
        raise ValueError(f"alert name {alert.name!r} is too long for a Grafana rule uid ({uid!r})")
    return uid


def grafana_description(description: str) -> str:
    """Prometheus' ``$value`` is the value of query A in Grafana."""
    return re.sub(r"\$value\b", "$values.A.Value", description)


def _panel_ids(settings: GeneratorSettings) -> dict[tuple[str, str], int]:
    ids: dict[tuple[str, str], int] = {}
    for dashboard in dashboards(settings).values():
        for panel in dashboard.to_json()["panels"]:
            ids[(dashboard.uid, panel["title"])] = panel["id"]
    return ids


def grafana_rule(alert: AlertDefinition, settings: GeneratorSettings, panel_id: int) -> dict[str, Any]:
    return {
        "uid": grafana_uid(alert),
        "title": alert.name,
        "condition": "B",
        "data": [
            {
                "refId": "A",
                "relativeTimeRange": {"from": QUERY_RANGE_SECONDS, "to": 0},
                "datasourceUid": f"${DATASOURCE_UID_ENV}",
                "model": {
                    "refId": "A",
                    "expr": alert.query,
                    "instant": True,
                    "range": False,
                    "intervalMs": 60000,
                    "maxDataPoints": 43200,
                },
            },
            {
                "refId": "B",
                "datasourceUid": "__expr__",
                "model": {
                    "refId": "B",
                    "type": "threshold",
                    "expression": "A",
                    "conditions": [
                        {"evaluator": {"type": alert.grafana_evaluator, "params": [alert.threshold]}}
                    ],
                },
            },
        ],
        # Like the Prometheus rule: no series means nothing to alert on.
        "noDataState": "OK",
        "execErrState": "Error",
        "for": alert.for_,
        "labels": {"severity": alert.severity},
        "annotations": {
            "summary": alert.summary,
            "description": grafana_description(alert.description),
            "runbook_url": settings.runbook_link(alert.anchor),
            "__dashboardUid__": alert.dashboard_uid,
            "__panelId__": str(panel_id),
        },
        "isPaused": False,
    }


def render_grafana_alerting(settings: GeneratorSettings) -> str:
    panel_ids = _panel_ids(settings)
    rules = []
    for alert in alerts(settings):
        key = (alert.dashboard_uid, alert.panel_title)
        if key not in panel_ids:
            raise ValueError(f"alert {alert.name} links to a missing panel {key}")
        rules.append(grafana_rule(alert, settings, panel_ids[key]))
    document = {
        "apiVersion": 1,
        "groups": [
            {"orgId": 1, "name": GROUP, "folder": FOLDER, "interval": EVALUATION_INTERVAL, "rules": rules}
        ],
    }
    header = (
        HEADER.format(thresholds=describe_thresholds(settings))
        + "\nGrafana-managed alert rules: put this file in provisioning/alerting/ and set"
        + f"\n{DATASOURCE_UID_ENV} to the uid of the Prometheus data source."
    )
    return yamltext.dump(document, header)
