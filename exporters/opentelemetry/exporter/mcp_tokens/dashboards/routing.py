# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Example routing: critical pages, warning opens a ticket, info stays on the dashboards.

Two examples, one per alerting stack: an Alertmanager configuration (with an inhibition
that silences McpToolResponsesHigh while McpToolResponsesCritical fires for the same
tool), and Grafana contact point plus notification policy provisioning. The Grafana one
is written as ``*.yaml.example`` on purpose: a provisioned notification policy replaces
the organisation's whole policy tree, so it must never be picked up by accident.
"""

from __future__ import annotations

from typing import Any

from . import names, yamltext
from .grafana_alerting import FOLDER

PAGER_WEBHOOK_ENV = "MCP_TOKENS_PAGER_WEBHOOK_URL"
TICKET_WEBHOOK_ENV = "MCP_TOKENS_TICKET_WEBHOOK_URL"
_TOOL_IDENTITY = [names.JOB, names.SIDE, names.SERVER, names.TOOL]


def alertmanager_example() -> dict[str, Any]:
    return {
        "route": {
            "receiver": "mcp-tokens-ticket",
            "group_by": ["alertname", names.JOB, names.SERVER],
            "group_wait": "30s",
            "group_interval": "5m",
            "repeat_interval": "4h",
            "routes": [
                {"matchers": ['severity="critical"'], "receiver": "mcp-tokens-pager"},
                {"matchers": ['severity="info"'], "receiver": "mcp-tokens-null"},
            ],
        },
        "inhibit_rules": [
            {
                "source_matchers": ['alertname="McpToolResponsesCritical"'],
                "target_matchers": ['alertname="McpToolResponsesHigh"'],
                "equal": _TOOL_IDENTITY,
            },
            {
                "source_matchers": ['alertname="McpBudgetCriticalCrossings"'],
                "target_matchers": ['alertname="McpBudgetWarningCrossings"'],
                "equal": [names.JOB, names.SIDE],
            },
        ],
        "receivers": [
            {"name": "mcp-tokens-pager", "webhook_configs": [{"url": "http://127.0.0.1:9095/pager"}]},
            {"name": "mcp-tokens-ticket", "webhook_configs": [{"url": "http://127.0.0.1:9095/ticket"}]},
            {"name": "mcp-tokens-null"},
        ],
    }


def render_alertmanager_example() -> str:
    header = (
        "Example Alertmanager routing for the mcp-tokens alerts (replace the webhook URLs).\n"
        "critical -> pager, warning -> ticket, info -> dropped (it stays visible on the dashboards)."
    )
    return yamltext.dump(alertmanager_example(), header)


def grafana_routing_example() -> dict[str, Any]:
    return {
        "apiVersion": 1,
        "contactPoints": [
            {
                "orgId": 1,
                "name": "mcp-tokens-pager",
                "receivers": [
                    {
                        "uid": "mcp-tokens-pager",
                        "type": "webhook",
                        "settings": {"url": f"${PAGER_WEBHOOK_ENV}"},
                    }
                ],
            },
            {
                "orgId": 1,
                "name": "mcp-tokens-ticket",
                "receivers": [
                    {
                        "uid": "mcp-tokens-ticket",
                        "type": "webhook",
                        "settings": {"url": f"${TICKET_WEBHOOK_ENV}"},
                    }
                ],
            },
        ],
        "policies": [
            {
                "orgId": 1,
                "receiver": "mcp-tokens-ticket",
                "group_by": ["grafana_folder", "alertname"],
                "routes": [
                    {
                        "receiver": "mcp-tokens-pager",
                        "object_matchers": [["severity", "=", "critical"], ["grafana_folder", "=", FOLDER]],
                    },
                    {
                        "receiver": "mcp-tokens-ticket",
                        "object_matchers": [["severity", "=", "warning"], ["grafana_folder", "=", FOLDER]],
                    },
                ],
            }
        ],
    }


def render_grafana_routing_example() -> str:
    header = (
        "Example Grafana contact points and notification policy for the mcp-tokens alerts.\n"
        "Rename to .yaml to use it. WARNING: a provisioned policy REPLACES the organisation's whole\n"
        f"notification policy tree; merge these routes into yours instead if you have one.\n"
        f"Grafana reads the webhook URLs from ${PAGER_WEBHOOK_ENV} and ${TICKET_WEBHOOK_ENV}."
    )
    return yamltext.dump(grafana_routing_example(), header)
