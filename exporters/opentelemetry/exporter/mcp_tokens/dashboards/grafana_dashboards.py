# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The Grafana dashboards, as classic dashboard JSON.

Every dashboard has the ``datasource`` variable (any Prometheus-compatible data
source, never a hard-coded uid and never ``__inputs``, so file provisioning works) and
multi-select ``job``, ``mcp_tokens_side`` and ``mcp_tokens_server_name`` variables that
every query honours where the metric has the label. Rates use ``$__rate_interval``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from .dashboard_budget import budget_dashboard
from .dashboard_overview import overview_dashboard
from .dashboard_tool import tool_dashboard
from .economics import economics_dashboard
from .model import Dashboard
from .settings import GeneratorSettings

DashboardBuilder = Callable[[GeneratorSettings], Dashboard]

DASHBOARDS: dict[str, DashboardBuilder] = {
    "grafana/mcp-tokens-overview.json": overview_dashboard,
    "grafana/mcp-tokens-tool.json": tool_dashboard,
    "grafana/mcp-tokens-budget.json": budget_dashboard,
    "grafana/mcp-tokens-economics.json": economics_dashboard,
}

PROVISIONING_FOLDER = "MCP tokens"


def dashboards(settings: GeneratorSettings) -> dict[str, Dashboard]:
    """Each dashboard by its path under the output directory."""
    return {path: build(settings) for path, build in DASHBOARDS.items()}


def render_dashboard(dashboard: Dashboard) -> str:
    # Sorted keys: the file only changes when the dashboard does, whatever the code order.
    return json.dumps(dashboard.to_json(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def render_provisioning() -> dict[str, object]:
    """A Grafana dashboard provider that loads the JSON files from a directory."""
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "mcp-tokens",
                "orgId": 1,
                "folder": PROVISIONING_FOLDER,
                "type": "file",
                "disableDeletion": False,
                "updateIntervalSeconds": 60,
                "allowUiUpdates": False,
                "options": {
                    # Copy (or mount) dashboards/grafana/*.json here; see the README.
                    "path": "/var/lib/grafana/dashboards/mcp-tokens",
                    "foldersFromFilesStructure": False,
                },
            }
        ],
    }
