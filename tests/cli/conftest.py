# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Shared fixtures of the CLI tests: the CLI run in-process, the fixture server, snapshots.

Snapshots live in tests/cli/snapshots/; regenerate them with
`MCP_TOKENS_UPDATE_SNAPSHOTS=1 .venv/bin/pytest tests/cli` and review the diff.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from opentelemetry.exporter.mcp_tokens.cli import app, sdk  # noqa: E402
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import load_bundled_encoding  # noqa: E402

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE_SNAPSHOTS = os.environ.get("MCP_TOKENS_UPDATE_SNAPSHOTS") == "1"
WIDTH = 110


def fixture_server(listing: str = "shop_v1", *extra: str) -> list[str]:
    """The command that runs tests/cli/fixture_server.py ("python" from PATH: see `cli_env`)."""
    return ["python", "-m", "tests.cli.fixture_server", "--listing", listing, *extra]


@dataclass(frozen=True)
class Run:
    code: int
    out: str
    err: str


CliRunner = Callable[..., Run]


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stable environment: repo root as cwd, this venv's python first on PATH, fixed width, no colour."""
    monkeypatch.chdir(REPO_ROOT)
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", os.pathsep.join([bin_dir, os.environ.get("PATH", "")]))
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    for variable in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "CLICOLOR_FORCE"):
        monkeypatch.delenv(variable, raising=False)


@pytest.fixture
def run_cli(cli_env: None, capsys: pytest.CaptureFixture[str]) -> CliRunner:
    """Run `mcp-tokens ARGS...` in this process; stdout and stderr are captured."""

    def run(*argv: str) -> Run:
        capsys.readouterr()
        code = app.main(list(argv))
        captured = capsys.readouterr()
        return Run(code, normalise(captured.out), normalise(captured.err))

    return run


def normalise(text: str) -> str:
    """Output with the SDK version replaced, so one snapshot serves both mcp lines."""
    return text.replace(sdk.client_description(), "mcp <version>")


def check_snapshot(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if UPDATE_SNAPSHOTS or not path.exists():
        if not UPDATE_SNAPSHOTS:
            pytest.fail(f"snapshot {name} is missing; create it with MCP_TOKENS_UPDATE_SNAPSHOTS=1")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
        return
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"output differs from {path} (regenerate with MCP_TOKENS_UPDATE_SNAPSHOTS=1)"


@pytest.fixture(scope="session")
def o200k():  # type: ignore[no-untyped-def]
    """tiktoken's Encoding for o200k_base, from the bundled ranks: the hand-computed side of the tests."""
    return load_bundled_encoding("o200k_base")
