# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The committed alert rules (with `for:` at 0s) in a real Prometheus, routed by a real
Alertmanager to a webhook: the demo's critical tool pages on both sides, its healthy tool
never fires anything."""

from __future__ import annotations

from typing import Any

import pytest

from examples.demo_content import CRITICAL_TOOL, HEALTHY_TOOL

from .conftest import DemoStack

pytestmark = pytest.mark.slow

ALERT_TIMEOUT_S = 60.0
CRITICAL_ALERT = "McpToolResponsesCritical"


@pytest.fixture(scope="module")
def critical_alerts(demo_stack: DemoStack) -> dict[str, dict[str, Any]]:
    """Wait (once) until the webhook received the critical alert from each side."""
    found: dict[str, dict[str, Any]] = {}
    for side in ("server", "client"):

        def is_critical(alert: dict[str, Any], side: str = side) -> bool:
            labels = alert.get("labels", {})
            return (
                alert.get("status") == "firing"
                and labels.get("alertname") == CRITICAL_ALERT
                and labels.get("gen_ai_tool_name") == CRITICAL_TOOL
                and labels.get("mcp_tokens_side") == side
                and labels.get("job") == f"demo-{side}"
            )

        alert = demo_stack.webhook.wait_for(is_critical, ALERT_TIMEOUT_S)
        if alert is not None:
            found[side] = alert
    return found


@pytest.mark.parametrize("side", ["server", "client"])
def test_critical_tool_alert_reaches_the_webhook(
    demo_stack: DemoStack, critical_alerts: dict[str, dict[str, Any]], side: str
) -> None:
    alerts = critical_alerts
    received = [a.get("labels") for a in demo_stack.webhook.alerts()]
    assert side in alerts, (
        f"no {CRITICAL_ALERT} for {CRITICAL_TOOL} on the {side} side; webhook got {received}"
    )
    alert = alerts[side]
    assert alert["labels"]["severity"] == "critical"
    assert alert["labels"]["job"] == f"demo-{side}"
    assert alert["labels"]["mcp_tokens_server_name"] == "mcp-tokens-demo"
    annotations = alert["annotations"]
    assert annotations["runbook_url"].endswith("#mcptoolresponsescritical")
    assert CRITICAL_TOOL in annotations["description"]
    # The description quotes the p95 Prometheus computed: above the 8000-token threshold.
    assert annotations["summary"].endswith(".")


def test_healthy_tool_never_fires(demo_stack: DemoStack, critical_alerts: dict[str, dict[str, Any]]) -> None:
    # Once the critical alert has fired, the rules have evaluated the sustained traffic of both tools.
    assert critical_alerts, "the critical alert never fired, so this check would prove nothing"
    prometheus = demo_stack.prometheus
    selector = (
        f'job=~"demo-.+", gen_ai_tool_name="{HEALTHY_TOOL}", mcp_tokens_direction="response", '
        'mcp_method_name="tools/call"'
    )
    p95 = prometheus.vector(
        f"histogram_quantile(0.95, sum by (job, le) (rate(mcp_tokens_payload_bucket{{{selector}}}[5m])))"
    )
    assert {item["metric"]["job"] for item in p95} == {"demo-server", "demo-client"}
    assert all(float(item["value"][1]) < 1000 for item in p95), p95
    ever = prometheus.vector(f'count_over_time(ALERTS{{gen_ai_tool_name="{HEALTHY_TOOL}"}}[10m])')
    assert ever == []
    webhook = [a for a in demo_stack.webhook.alerts() if a["labels"].get("gen_ai_tool_name") == HEALTHY_TOOL]
    assert webhook == []


def test_prometheus_lists_the_critical_alert_as_firing(
    demo_stack: DemoStack, critical_alerts: dict[str, dict[str, Any]]
) -> None:
    assert critical_alerts
    firing = [
        alert
        for alert in demo_stack.prometheus.alerts()
        if alert["labels"].get("alertname") == CRITICAL_ALERT and alert["state"] == "firing"
    ]
    assert {alert["labels"]["gen_ai_tool_name"] for alert in firing} == {CRITICAL_TOOL}
    assert all(float(alert["value"]) > 8000 for alert in firing), firing
