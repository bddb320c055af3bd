# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Shared fixtures: the committed dashboards/ directory, the generated files, promtool."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens.dashboards import GeneratorSettings, render_all

REPO = Path(__file__).resolve().parents[2]
DASHBOARDS = REPO / "dashboards"

PromtoolRunner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


@pytest.fixture(scope="session")
def settings() -> GeneratorSettings:
    return GeneratorSettings()


@pytest.fixture(scope="session")
def generated(settings: GeneratorSettings) -> dict[str, str]:
    return render_all(settings)


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        # CI (.ci/run) installs Debian's prometheus and prometheus-alertmanager packages.
        pytest.skip(f"{name} is not installed (apt-get install prometheus prometheus-alertmanager)")
    return path


@pytest.fixture(scope="session")
def promtool() -> PromtoolRunner:
    binary = _tool("promtool")

    def run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)

    return run


@pytest.fixture(scope="session")
def amtool() -> PromtoolRunner:
    binary = _tool("amtool")

    def run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60, check=False)

    return run
