# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Multi-worker MCP servers as they are deployed, under the real `opentelemetry-instrument`,
two workers each, serving `tests.e2e.workers_app` (the demo server plus `worker_pid`) over
stateless streamable HTTP:

- `uvicorn --workers 2` and `gunicorn -k uvicorn_worker.UvicornWorker -w 2`, with and without
  `--preload`, with `--metrics_exporter mcp_tokens_prometheus`, scraped by a real Prometheus
  at the one endpoint each serves;
- `uvicorn --workers 2` with `--metrics_exporter mcp_tokens_remote_write`, pushing into the
  same Prometheus (`--web.enable-remote-write-receiver`).

An uninstrumented client makes every call on a connection of its own, so the calls spread over
both workers (the `worker_pid` answers prove it), and computes from what it received, with
tiktoken alone, what each payload costs. Prometheus must return exactly those sums on every
path, the tool-definition tax once (not once per worker), what a killed worker counted after
it died, and data for every dashboard panel the server's metrics feed. The scraped servers'
workers wait for scrapes on sockets (not polling), and a killed worker's socket is cleared.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.exporter.mcp_tokens.dashboards.expressions import dashboard_expressions
from opentelemetry.exporter.mcp_tokens.dashboards.settings import GeneratorSettings
from opentelemetry.exporter.mcp_tokens.prometheus.notify import ROOT_SOCKET

from examples.demo_client import connect
from examples.processes import HOST, REPO_ROOT, Child, child_env, free_port, launcher

from .conftest import RULES, require_sdk_configurator
from .expected import (
    EXACT_CALLS,
    compact,
    definition_tokens,
    overhead_by_tool_and_kind,
    result_tokens,
    text_tokens,
)
from .monitoring import Prometheus, running_prometheus
from .raw_mcp import RawSession
from .test_prometheus_e2e import CONTRACT_METRICS, EMPTY_UNLESS_A_SERVER_IS_OVER_A_TOOL_LIMIT
from .workers_app import PID_TOOL

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

WORKERS = 2
APP = "tests.e2e.workers_app:app"
# Text-only tools (the image's count is an estimate from its pixels, checked elsewhere).
CALLS = tuple((tool, arguments) for tool, arguments in EXACT_CALLS if tool != "render_chart")
MAX_PID_CALLS = 40
STARTUP_TIMEOUT_S = 60.0
EXACT_TIMEOUT_S = 60.0
PUSH_INTERVAL_MS = 1000
_IDENTIFIER = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def uvicorn_command(port: int, *extra: str) -> list[str]:
    return [_script("uvicorn"), APP, "--workers", str(WORKERS), "--host", HOST, "--port", str(port), *extra]


def gunicorn_command(port: int, *extra: str) -> list[str]:
    worker = ["-k", "uvicorn_worker.UvicornWorker", "-w", str(WORKERS), "-b", f"{HOST}:{port}"]
    return [_script("gunicorn"), *worker, *extra, APP]


def _script(name: str) -> str:
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        pytest.fail(f"{name} is not installed beside {sys.executable} (the test extra installs it)")
    return str(path)


@dataclass
class Deployment:
    job: str
    exporter: str
    command: list[str]
    mcp_port: int
    metrics_port: int | None  # None: pushes
    tree_base: Path
    child: Child | None = None
    results: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    pids: set[str] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.mcp_port}/mcp"

    @property
    def selector(self) -> str:
        return f'job="{self.job}", mcp_tokens_side="server"'


def deployments(workdir: Path) -> list[Deployment]:
    made = []
    for job, exporter, server, extra in (
        ("uvicorn-workers", "mcp_tokens_prometheus", uvicorn_command, ()),
        ("gunicorn-workers", "mcp_tokens_prometheus", gunicorn_command, ()),
        ("gunicorn-preload", "mcp_tokens_prometheus", gunicorn_command, ("--preload",)),
        ("uvicorn-remote-write", "mcp_tokens_remote_write", uvicorn_command, ()),
    ):
        port = free_port()
        base = workdir / job
        base.mkdir()
        metrics = free_port() if exporter == "mcp_tokens_prometheus" else None
        made.append(Deployment(job, exporter, server(port, *extra), port, metrics, base))
    return made


def start(deployment: Deployment, remote_write_url: str, workdir: Path) -> Child:
    env = {
        "OTEL_SERVICE_NAME": deployment.job,
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_EXPORTER_MCP_TOKENS_PROMETHEUS_DIR": str(deployment.tree_base),
    }
    if deployment.metrics_port is not None:
        env["OTEL_EXPORTER_PROMETHEUS_HOST"] = HOST
        env["OTEL_EXPORTER_PROMETHEUS_PORT"] = str(deployment.metrics_port)
    else:
        env["OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_ENDPOINT"] = remote_write_url
        env["OTEL_EXPORTER_MCP_TOKENS_REMOTE_WRITE_INTERVAL"] = str(PUSH_INTERVAL_MS)
    argv = [launcher(), "--metrics_exporter", deployment.exporter, *deployment.command]
    log_path = workdir / f"{deployment.job}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv, cwd=REPO_ROOT, env=child_env(env), stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    ports = (
        (deployment.mcp_port,)
        if deployment.metrics_port is None
        else (deployment.mcp_port, deployment.metrics_port)
    )
    return Child(deployment.job, process, log_path, ports, argv)


async def drive(deployment: Deployment) -> None:
    """List once, then every call and `worker_pid` calls until two workers answered, each call on
    a connection of its own."""
    deployment.tools = await anyio.to_thread.run_sync(list_tools_raw, deployment.mcp_port)
    for tool, arguments in CALLS:
        await call(deployment, tool, arguments)
    for _ in range(MAX_PID_CALLS):
        result = await call(deployment, PID_TOOL, {})
        deployment.pids.add(result["content"][0]["text"])
        if len(deployment.pids) >= WORKERS:
            break


def list_tools_raw(port: int) -> list[dict[str, Any]]:
    """The listing as the wire carried it: its key order is what is counted (MCPServer's is not
    the order of a client's re-dump of the `Tool` models)."""
    session = RawSession(port)
    try:
        session.initialize()
        tools: list[dict[str, Any]] = session.request("tools/list", {})["tools"]
    finally:
        session.close()
    return tools


async def call(deployment: Deployment, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with connect(deployment.url) as session:
        result = await session.call_tool(tool, arguments)
        assert result is not None and not session.errors, session.errors
    deployment.results.append((tool, arguments, result))
    return result


async def drive_all(stack: list[Deployment]) -> None:
    async with anyio.create_task_group() as group:
        for deployment in stack:
            group.start_soon(drive, deployment)


@dataclass
class WorkersStack:
    prometheus: Prometheus
    deployments: dict[str, Deployment]


@pytest.fixture(scope="module")
def workers_stack(
    monitoring_binaries: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkersStack]:
    require_sdk_configurator()
    workdir = tmp_path_factory.mktemp("e2e-workers")
    stack = deployments(workdir)
    scraped = {d.job: [d.metrics_port] for d in stack if d.metrics_port is not None}
    with running_prometheus(
        monitoring_binaries[0],
        workdir / "prometheus",
        scraped,
        [RULES],
        extra_args=["--web.enable-remote-write-receiver"],
    ) as prometheus:
        try:
            for deployment in stack:
                deployment.child = start(deployment, f"{prometheus.url}/api/v1/write", workdir)
            for deployment in stack:
                assert deployment.child is not None
                deployment.child.wait_ready(STARTUP_TIMEOUT_S)
            anyio.run(drive_all, stack)
            yield WorkersStack(prometheus, {d.job: d for d in stack})
        finally:
            for deployment in stack:
                if deployment.child is not None:
                    deployment.child.stop()


JOBS = ["uvicorn-workers", "gunicorn-workers", "gunicorn-preload", "uvicorn-remote-write"]


def expected_sums(deployment: Deployment) -> dict[str, dict[str, float]]:
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for tool, arguments, result in deployment.results:
        sums["request"][tool] += text_tokens(compact(arguments))
        sums["response"][tool] += result_tokens(result)
        sums["calls"][tool] += 1
        if tool == PID_TOOL:  # the str return's `{"result": ...}` copy
            sums["duplicate"][tool] += text_tokens(compact(result["structuredContent"]))
    for (tool, kind), tokens in overhead_by_tool_and_kind(CALLS).items():
        if kind == "duplicate":
            sums["duplicate"][tool] += tokens
    return {kind: dict(values) for kind, values in sums.items()}


def by_tool(result: list[dict[str, Any]]) -> dict[str, float]:
    return {item["metric"].get("gen_ai_tool_name", ""): float(item["value"][1]) for item in result}


def queries(deployment: Deployment) -> dict[str, str]:
    calls = f'{deployment.selector}, mcp_method_name="tools/call"'
    per_tool = "sum by (gen_ai_tool_name) ({}{{{}, {}}})".format
    return {
        "request": per_tool("mcp_tokens_payload_sum", calls, 'mcp_tokens_direction="request"'),
        "response": per_tool("mcp_tokens_payload_sum", calls, 'mcp_tokens_direction="response"'),
        "calls": per_tool("mcp_tokens_payload_count", calls, 'mcp_tokens_direction="response"'),
        "duplicate": per_tool("mcp_tokens_overhead_total", calls, 'mcp_tokens_overhead_kind="duplicate"'),
    }


def wait_for_sums(prometheus: Prometheus, deployment: Deployment) -> dict[str, dict[str, float]]:
    want = expected_sums(deployment)
    got = {}
    for kind, expr in queries(deployment).items():
        result = prometheus.wait_until(expr, lambda r, k=kind: by_tool(r) == want[k], EXACT_TIMEOUT_S)
        got[kind] = by_tool(result)
    return got


@pytest.mark.parametrize("job", JOBS)
def test_calls_spread_over_both_workers(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    assert len(deployment.pids) == WORKERS, deployment.pids
    assert deployment.child is not None and "Traceback" not in deployment.child.log_text(limit=200_000)


@pytest.mark.parametrize("job", JOBS)
def test_prometheus_returns_the_exact_sums_of_every_worker(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    assert expected_sums(deployment) == wait_for_sums(workers_stack.prometheus, deployment)


@pytest.mark.parametrize("job", JOBS)
def test_the_definition_tax_is_counted_once(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    prometheus = workers_stack.prometheus
    want = float(sum(definition_tokens(tool) for tool in deployment.tools))
    # What the dashboards compute: the tax per server, whatever number of processes reported it.
    expr = (
        "sum by (mcp_tokens_server_name) (max by (mcp_tokens_server_name, gen_ai_tool_name) "
        f"(mcp_tokens_tool_definition{{{deployment.selector}}}))"
    )
    result = prometheus.wait_until(
        expr, lambda r: [float(i["value"][1]) for i in r] == [want], EXACT_TIMEOUT_S
    )
    assert [float(item["value"][1]) for item in result] == [want]
    if deployment.metrics_port is not None:
        # One endpoint, one series per tool: the workers' listings are not added up.
        raw = prometheus.vector(f"sum(mcp_tokens_tool_definition{{{deployment.selector}}})")
        assert float(raw[0]["value"][1]) == want
        assert len(prometheus.vector(f"mcp_tokens_tool_definition{{{deployment.selector}}}")) == len(
            deployment.tools
        )


def test_pushed_series_keep_the_workers_apart(workers_stack: WorkersStack) -> None:
    deployment = workers_stack.deployments["uvicorn-remote-write"]
    wait_for_sums(workers_stack.prometheus, deployment)
    calls = f'{deployment.selector}, mcp_method_name="tools/call"'
    instances = workers_stack.prometheus.vector(f"count by (instance) (mcp_tokens_payload_count{{{calls}}})")
    assert len(instances) == WORKERS, instances
    info = workers_stack.prometheus.vector(f'target_info{{job="{deployment.job}"}}')
    assert {item["metric"]["instance"] for item in info} >= {item["metric"]["instance"] for item in instances}


def server_log(deployment: Deployment) -> str:
    log = deployment.child.log_text() if deployment.child is not None else "(not started)"
    return f"server log:\n{log}"


def worker_sockets(deployment: Deployment) -> list[str]:
    trees = list(deployment.tree_base.iterdir())
    # One server, one directory; if not, the server's own log (read only then) says what
    # became of it.
    assert len(trees) == 1, f"{deployment.job}: {trees} in {deployment.tree_base}; {server_log(deployment)}"
    (tree,) = trees
    assert (tree / ROOT_SOCKET).is_socket()  # the root's: the workers are notified, they do not poll
    return [path.name for path in tree.glob("w-*.s") if path.is_socket()]


@pytest.mark.parametrize("job", [job for job in JOBS if "remote-write" not in job])
def test_every_worker_waits_for_scrapes_on_a_socket(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    wait_for_sums(workers_stack.prometheus, deployment)
    names = worker_sockets(deployment)
    assert {pid for pid in deployment.pids if any(name.startswith(f"w-{pid}-") for name in names)} == (
        deployment.pids
    )


def test_a_killed_worker_keeps_what_it_counted(workers_stack: WorkersStack) -> None:
    deployment = workers_stack.deployments["uvicorn-workers"]
    prometheus = workers_stack.prometheus
    want = expected_sums(deployment)
    assert wait_for_sums(prometheus, deployment) == want  # every worker has answered a scrape
    killed = sorted(deployment.pids)[0]
    os.kill(int(killed), signal.SIGKILL)
    time.sleep(3.0)  # scrapes that fold the dead worker's file
    assert wait_for_sums(prometheus, deployment) == want
    assert not [name for name in worker_sockets(deployment) if name.startswith(f"w-{killed}-")]
    counts = prometheus.vector(
        f'resets(mcp_tokens_payload_count{{{deployment.selector}, mcp_method_name="tools/call"}}[1m]) > 0'
    )
    assert counts == []  # no series ever went backwards


def _referenced(expr: str) -> set[str]:
    return set(_IDENTIFIER.findall(expr)) & CONTRACT_METRICS


@pytest.mark.parametrize("job", JOBS)
def test_every_panel_the_servers_metrics_feed_returns_data(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    prometheus = workers_stack.prometheus
    wait_for_sums(prometheus, deployment)
    prometheus.wait_until(
        f'count_over_time(mcp_tokens_payload_count{{job="{job}"}}[1m])',
        lambda r: any(float(i["value"][1]) >= 3 for i in r),
        EXACT_TIMEOUT_S,
    )
    exported = {i["metric"]["__name__"] for i in prometheus.vector(f'count by (__name__) ({{job="{job}"}})')}
    empty, checked = [], 0
    for expression in dashboard_expressions(GeneratorSettings()):
        if not _referenced(expression.expr) <= exported:
            continue  # the client side, budgets: this server does not feed them
        if deployment.metrics_port is None and re.search(r"\bup\b", expression.expr):
            continue  # scrape health: pushed series have no `up`
        checked += 1
        if any(name in expression.source for name in EMPTY_UNLESS_A_SERVER_IS_OVER_A_TOOL_LIMIT):
            continue
        if not prometheus.vector(expression.substituted({"job": job})):
            empty.append(f"{expression.source}: {expression.expr}")
    assert empty == []
    assert checked >= 20, checked


@pytest.mark.parametrize("job", JOBS)
def test_stopping_the_server_removes_its_directory(workers_stack: WorkersStack, job: str) -> None:
    deployment = workers_stack.deployments[job]
    assert deployment.child is not None
    deployment.child.stop()
    assert deployment.child.process.returncode is not None
    assert list(deployment.tree_base.iterdir()) == []
