# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The artefacts a user gets: `python -m build` makes an sdist that is the whole project (so
`make demo` and `make test` work in it) and a wheel that is the package alone, with the licence;
the wheel, installed by itself in a fresh virtualenv, counts a client's tool results exactly
under `opentelemetry-instrument`, run from an empty directory with no source tree on sys.path.

One build and one install serve every test here (about a minute and a half, most of it pip
installing the dependencies into the new virtualenv).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTION = "opentelemetry_instrumentation_mcp_tokens"
# The package's two source roots, as the wheel maps them (pyproject's wheel sources).
PACKAGE_ROOTS = {
    "instrumentation/opentelemetry": "opentelemetry",
    "exporters/opentelemetry": "opentelemetry",
}
# What `make demo`, `make test` and CI need besides the package: the sdist must hold them.
PROJECT_FILES = (
    "LICENSE",
    "README.md",
    "CHANGELOG.md",
    "Makefile",
    "pyproject.toml",
    "constraints.txt",
    "constraints-mcp1.txt",
    "constraints-claude.txt",
    ".ci/run",
    ".ci/python312",
    "examples/demo.py",
    "examples/otel-collector.yaml",
    "tests/pythons.py",
    "tests/e2e/conftest.py",
    "docs/telemetry.md",
    "dashboards/prometheus/alerts.yaml",
)
BUILD_TIMEOUT_S = 300
INSTALL_TIMEOUT_S = 600
RUN_TIMEOUT_S = 120
COUNTS = (3, 40, 400)
TOOL = "orders"

# A server nobody here wrote the way a user would: the SDK's own high-level server, one tool.
SERVER = """
import importlib.metadata, json
if int(importlib.metadata.version("mcp").split(".")[0]) >= 2:
    from mcp.server.mcpserver import MCPServer as Server
else:
    from mcp.server.fastmcp import FastMCP as Server

server = Server("wheel-check", log_level="WARNING")


@server.tool(structured_output=False)
def orders(count: int) -> str:
    rows = [{"id": f"ord-{i:05d}", "status": "shipped", "amount": round(i * 1.37, 2)} for i in range(count)]
    return json.dumps(rows, separators=(",", ":"))


server.run()
"""

# The client: calls the tool over stdio, then says what it received and where its imports came
# from. opentelemetry-instrument instruments it; the report exporter writes at its exit.
CLIENT = """
import asyncio, importlib.metadata, json, sys
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import opentelemetry.instrumentation.mcp_tokens as package

SERVER = StdioServerParameters(command=sys.executable, args=[str(Path(__file__).with_name("server.py"))])
COUNTS = json.loads(sys.argv[2])


async def calls(session):
    results = [await session.call_tool("orders", {"count": count}) for count in COUNTS]
    return [[block.text for block in result.content] for result in results]


async def main():
    if int(importlib.metadata.version("mcp").split(".")[0]) >= 2:
        from mcp import Client

        async with Client(SERVER, mode="legacy") as client:
            return await calls(client)
    async with stdio_client(SERVER) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await calls(session)


texts = asyncio.run(main())
Path(sys.argv[1]).write_text(json.dumps({"texts": texts, "package": package.__file__, "sys_path": sys.path}))
"""


@dataclass(frozen=True)
class Artifacts:
    sdist: Path
    wheel: Path


def _run(command: list[str], timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    finished = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)
    assert finished.returncode == 0, (
        f"{' '.join(command)}\n{finished.stdout[-3000:]}\n{finished.stderr[-3000:]}"
    )
    return finished


def _constraints() -> Path:
    """The pins of the SDK line this suite runs on."""
    major = int(importlib.metadata.version("mcp").split(".")[0])
    return REPO_ROOT / ("constraints.txt" if major >= 2 else "constraints-mcp1.txt")


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Artifacts:
    out = tmp_path_factory.mktemp("dist")
    # An isolated build, as a user's `python -m build` runs it; the constraints pin hatchling.
    env = {**os.environ, "PIP_CONSTRAINT": str(REPO_ROOT / "constraints.txt")}
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO_ROOT)], BUILD_TIMEOUT_S, env=env)
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Artifacts(sdist, wheel)


def _project_files() -> set[str] | None:
    """The files git tracks or would (not ignored), as the sdist should hold them; None
    outside a git checkout (in an unpacked sdist)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return None
    return {name for name in listed if (REPO_ROOT / name).is_file()}


def _sdist_members(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        return {member.name.split("/", 1)[1] for member in archive.getmembers() if member.isfile()}


def test_the_sdist_is_the_whole_project(artifacts: Artifacts) -> None:
    members = _sdist_members(artifacts.sdist)
    assert set(PROJECT_FILES) <= members, sorted(set(PROJECT_FILES) - members)
    project = _project_files()
    if project is None:
        pytest.skip("not a git checkout: the sdist's files are checked against git's list in one")
    assert members - {"PKG-INFO"} == project


def test_the_sdist_declares_the_licence(artifacts: Artifacts) -> None:
    with tarfile.open(artifacts.sdist) as archive:
        top = archive.getnames()[0].split("/", 1)[0]
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        assert pkg_info is not None
        metadata = pkg_info.read().decode()
    assert "License-Expression: Apache-2.0" in metadata.splitlines()
    assert "License-File: LICENSE" in metadata.splitlines()


def _package_files() -> set[str]:
    """Every file of the package's source roots, named as the wheel places it."""
    found = set()
    for source, target in PACKAGE_ROOTS.items():
        root = REPO_ROOT / source
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found.add(f"{target}/{path.relative_to(root).as_posix()}")
    return found


def test_the_wheel_is_the_package_and_its_licence(artifacts: Artifacts) -> None:
    with zipfile.ZipFile(artifacts.wheel) as archive:
        names = set(archive.namelist())
        dist_info = next(name.split("/")[0] for name in names if name.endswith(".dist-info/METADATA"))
        licence = archive.read(f"{dist_info}/licenses/LICENSE")
        metadata = archive.read(f"{dist_info}/METADATA").decode().splitlines()
    assert dist_info.startswith(f"{DISTRIBUTION}-")
    package = {name for name in names if not name.startswith(f"{dist_info}/")}
    assert package == _package_files()
    assert names - package == {
        f"{dist_info}/{name}"
        for name in ("METADATA", "WHEEL", "RECORD", "entry_points.txt", "licenses/LICENSE")
    }
    assert licence == (REPO_ROOT / "LICENSE").read_bytes()
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata


@dataclass(frozen=True)
class Installed:
    venv: Path
    received: dict[str, Any]
    report: dict[str, Any]


def _clean_environment(venv: Path) -> dict[str, str]:
    """This process's environment without anything that points Python at the source tree or
    configures OpenTelemetry."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("PYTHON", "OTEL_", "VIRTUAL_ENV", "PIP_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(scope="module")
def installed(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel-alone")
    venv, app, empty = base / "venv", base / "app", base / "empty"
    app.mkdir()
    empty.mkdir()
    env = _clean_environment(venv)
    _run([sys.executable, "-m", "venv", str(venv)], INSTALL_TIMEOUT_S, env=env)
    python = str(venv / "bin" / "python")
    pip = [python, "-m", "pip", "install", "-q", "--no-compile", "-c", str(_constraints())]
    _run([*pip, f"{artifacts.wheel}[instruments]"], INSTALL_TIMEOUT_S, env=env, cwd=empty)
    (app / "server.py").write_text(SERVER)
    (app / "client.py").write_text(CLIENT)
    received, report = app / "received.json", app / "report.json"
    run_env = {
        **env,
        "OTEL_SERVICE_NAME": "wheel-check-client",
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_PATH": str(report),
        "OTEL_EXPORTER_MCP_TOKENS_REPORT_TERMINAL": "false",
    }
    command = [
        str(venv / "bin" / "opentelemetry-instrument"),
        "--traces_exporter",
        "none",
        "--logs_exporter",
        "none",
        "--metrics_exporter",
        "mcp_tokens_report",
        python,
        str(app / "client.py"),
        str(received),
        json.dumps(COUNTS),
    ]
    _run(command, RUN_TIMEOUT_S, env=run_env, cwd=empty)
    assert list(empty.iterdir()) == [], "the run wrote into the directory it ran from"
    yield Installed(venv, json.loads(received.read_text()), json.loads(report.read_text()))


def test_the_installed_wheel_runs_from_its_virtualenv_alone(installed: Installed) -> None:
    site_packages = installed.venv / "lib"
    assert Path(installed.received["package"]).is_relative_to(site_packages)
    for entry in installed.received["sys_path"]:
        assert not Path(entry or ".").resolve().is_relative_to(REPO_ROOT), entry


def test_the_installed_wheel_counts_the_clients_tool_results_exactly(installed: Installed) -> None:
    encoding = load_bundled_encoding("o200k_base")
    texts = [text for result in installed.received["texts"] for text in result]
    assert len(texts) == len(COUNTS)
    expected = sum(len(encoding.encode_ordinary(text)) for text in texts)
    (operation,) = [
        operation
        for operation in installed.report["operations"]
        if (operation["side"], operation["method"], operation["target"]) == ("client", "tools/call", TOOL)
    ]
    assert (operation["calls"], operation["response_tokens"]) == (len(COUNTS), expected)
    assert operation["max_exact"] is True
    assert operation["encodings"] == ["o200k_base"]
