# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Session fixtures for the end-to-end tests: real Prometheus and Alertmanager on 127.0.0.1, a
webhook, and the demo server and client running under `opentelemetry-instrument`.

One Prometheus serves the whole session (its first scrape comes ~5 s after start, so it is
started once, before the instrumented processes). It scrapes four jobs:

- `demo-server` / `demo-client`: the demo scenario, then the client keeps calling the
  critical tool and a healthy tool every 0.5 s, so rate-based alerts have data.
- `exact-server` / `exact-client`: exactly the calls of `expected.EXACT_CALLS`, once.

It loads the committed recording rules and the committed alert rules rendered with every
`for:` at 0s (`AlertTiming(for_override="0s")`), and sends alerts to a real Alertmanager
that posts to a webhook in this process.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from opentelemetry.exporter.mcp_tokens.dashboards import AlertTiming, GeneratorSettings  # noqa: E402
from opentelemetry.exporter.mcp_tokens.dashboards.prometheus_rules import render_alerts  # noqa: E402

from examples import demo_content  # noqa: E402
from examples.demo_client import MARKER  # noqa: E402
from examples.processes import HOST, Child, free_port, prometheus_env, read_marked_line, start_module  # noqa: E402

from .expected import EXACT_CALLS  # noqa: E402
from .monitoring import (  # noqa: E402
    Alertmanager,
    Prometheus,
    Webhook,
    find_binary,
    running_alertmanager,
    running_prometheus,
    running_webhook,
)

RULES = _REPO_ROOT / "dashboards" / "prometheus" / "rules.yaml"
ALERTS = _REPO_ROOT / "dashboards" / "prometheus" / "alerts.yaml"
STARTUP_TIMEOUT_S = 30.0
CLIENT_TIMEOUT_S = 60.0
# The clients stay alive (and scrapeable) this long at most; teardown ends them sooner.
LINGER_S = 170.0
SUSTAIN_INTERVAL_S = 0.5


@dataclass
class DemoStack:
    prometheus: Prometheus
    alertmanager: Alertmanager
    webhook: Webhook
    children: dict[str, Child]
    reports: dict[str, dict[str, Any]]
    workdir: Path


def require_sdk_configurator() -> None:
    """`opentelemetry-instrument` only configures exporters through a configurator entry point
    (opentelemetry-distro); without one the instrumented processes export nothing."""
    if not list(entry_points(group="opentelemetry_configurator")):
        pytest.fail(
            "no opentelemetry_configurator entry point: install opentelemetry-distro in this environment"
        )


@pytest.fixture(scope="package")
def monitoring_binaries() -> tuple[str, str]:
    prometheus = find_binary("prometheus")
    alertmanager = find_binary("prometheus-alertmanager", "alertmanager")
    if prometheus is None or alertmanager is None:
        pytest.skip(
            "Debian's prometheus and prometheus-alertmanager are not installed (`apt-get install -y "
            "--no-install-recommends prometheus prometheus-alertmanager`; .ci/run installs them)"
        )
    return prometheus, alertmanager


def fast_alert_rules(target: Path) -> Path:
    """The committed alert rules as the generator renders them with every `for:` at 0s, so a
    test sees them fire within seconds. Windows and thresholds stay the committed ones."""
    text = render_alerts(GeneratorSettings(timing=AlertTiming(for_override="0s")))

    def essentials(document: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
        # Names, expressions and labels; `for:` and the text quoting it are what differ.
        rules = [rule for group in document["groups"] for rule in group["rules"]]
        return [(rule["alert"], rule["expr"], rule.get("labels", {})) for rule in rules]

    if essentials(yaml.safe_load(text)) != essentials(yaml.safe_load(ALERTS.read_text(encoding="utf-8"))):
        pytest.fail(f"{ALERTS} is not what the generator renders: regenerate dashboards/ first")
    target.write_text(text, encoding="utf-8")
    return target


def start_instrumented_server(
    name: str, workdir: Path, env: dict[str, str], extra_ports: tuple[int, ...]
) -> tuple[Child, int]:
    mcp_port = free_port()
    child = start_module(
        name, "examples.demo_server", ["--port", str(mcp_port)], env, workdir, ports=(mcp_port, *extra_ports)
    )
    return child, mcp_port


def start_instrumented_client(
    name: str, workdir: Path, env: dict[str, str], mcp_port: int, args: list[str]
) -> Child:
    return start_module(
        name,
        "examples.demo_client",
        ["--url", f"http://{HOST}:{mcp_port}/mcp", *args],
        env,
        workdir,
        stdout_pipe=True,
    )


def write_calls(path: Path) -> Path:
    path.write_text(json.dumps([[tool, arguments] for tool, arguments in EXACT_CALLS]), encoding="utf-8")
    return path


# Package scope: torn down when the last e2e test is done, not at the end of the whole run.
@pytest.fixture(scope="package")
def demo_stack(
    monitoring_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DemoStack]:
    require_sdk_configurator()
    prometheus_bin, alertmanager_bin = monitoring_binaries
    workdir = tmp_path_factory.mktemp("e2e-stack")
    metrics_ports = {
        job: free_port() for job in ("demo-server", "demo-client", "exact-server", "exact-client")
    }
    rule_files = [RULES, fast_alert_rules(workdir / "alerts-for-0s.yaml")]
    children: dict[str, Child] = {}
    with (
        running_webhook() as webhook,
        running_alertmanager(alertmanager_bin, workdir / "alertmanager", webhook.url) as alertmanager,
        running_prometheus(
            prometheus_bin,
            workdir / "prometheus",
            {job: [port] for job, port in metrics_ports.items()},
            rule_files,
            alertmanager.port,
        ) as prometheus,
    ):
        try:
            mcp_ports = {}
            for job in ("demo-server", "exact-server"):
                children[job], mcp_ports[job] = start_instrumented_server(
                    job,
                    workdir,
                    prometheus_env(f"mcp-tokens-{job}", metrics_ports[job]),
                    (metrics_ports[job],),
                )
            for job in ("demo-server", "exact-server"):
                children[job].wait_ready(STARTUP_TIMEOUT_S)
            sustain = f"{demo_content.CRITICAL_TOOL},{demo_content.HEALTHY_TOOL}"
            children["demo-client"] = start_instrumented_client(
                "demo-client",
                workdir,
                prometheus_env("mcp-tokens-demo-client", metrics_ports["demo-client"]),
                mcp_ports["demo-server"],
                [
                    "--linger",
                    str(LINGER_S),
                    "--sustain-tools",
                    sustain,
                    "--interval",
                    str(SUSTAIN_INTERVAL_S),
                ],
            )
            children["exact-client"] = start_instrumented_client(
                "exact-client",
                workdir,
                prometheus_env("mcp-tokens-exact-client", metrics_ports["exact-client"]),
                mcp_ports["exact-server"],
                [
                    "--scenario",
                    "calls",
                    "--calls-file",
                    str(write_calls(workdir / "calls.json")),
                    "--linger",
                    str(LINGER_S),
                ],
            )
            reports = {
                job: json.loads(read_marked_line(children[job], MARKER, CLIENT_TIMEOUT_S))
                for job in ("demo-client", "exact-client")
            }
            yield DemoStack(prometheus, alertmanager, webhook, children, reports, workdir)
        finally:
            for job in ("demo-client", "exact-client", "demo-server", "exact-server"):
                if job in children:
                    children[job].stop(grace_s=1.0)
