# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The unit and integration tests on every Python the classifiers claim: `make test-pythons`.

    python3 -m tests.pythons [--only 3.10,3.13] [--line 2]

For each `Programming Language :: Python :: 3.X` classifier of pyproject.toml it looks for
that interpreter on this machine (pyenv's versions, then `python3.X` on PATH), and in a
virtualenv of its own per SDK line (`.venv-py3.X` on mcp 2.x, `.venv-py3.X-mcp1` on mcp
1.x, installed from constraints.txt and constraints-mcp1.txt as `make install` and
`make install-mcp1` do, again whenever those files or pyproject.toml change) runs
`pytest tests/unit tests/integration` (on 1.x: `tests/integration`, what depends on the
SDK line). Prints one row per run and exits 1 when a run failed or could not install. A
claimed Python this machine does not have is named, not failed: CI keeps one Python for
time, and the README's compatibility table says which ones ran.

Standard library only: it runs on whichever python3 starts it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
_CLASSIFIER = re.compile(r'"Programming Language :: Python :: (3\.\d+)"')


@dataclass(frozen=True)
class Line:
    """One SDK line's environment: what `make install` (2.x) or `make install-mcp1` installs."""

    name: str
    suffix: str
    constraints: str
    extras: str
    packages: tuple[str, ...]
    tests: tuple[str, ...]


LINES = {
    "2": Line("mcp 2.x", "", "constraints.txt", "instruments,huggingface,test", ("fastmcp", "mcp-server-git"),
              ("tests/unit", "tests/integration")),
    "1": Line("mcp 1.x", "-mcp1", "constraints-mcp1.txt", "instruments,test", ("fastmcp",),
              ("tests/integration",)),
}  # fmt: skip


@dataclass
class Run:
    python: str
    line: str
    outcome: str
    seconds: float


def claimed_pythons(pyproject: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The `3.X` versions pyproject.toml's classifiers claim, in order."""
    return _CLASSIFIER.findall(pyproject.read_text(encoding="utf-8"))


def find_interpreter(version: str) -> Path | None:
    """An interpreter of `version` (`3.X`) that runs: pyenv's newest, else `python3.X` on PATH."""
    candidates: list[Path] = []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    installed = sorted(
        (pyenv_root / "versions").glob(f"{version}.*"),
        key=lambda path: [int(part) if part.isdigit() else -1 for part in path.name.split(".")],
    )
    candidates += [path / "bin" / "python" for path in reversed(installed)]
    on_path = shutil.which(f"python{version}")
    if on_path is not None:
        candidates.append(Path(on_path))
    for candidate in candidates:
        if _reports(candidate, version):
            return candidate
    return None


def _reports(interpreter: Path, version: str) -> bool:
    """Whether `interpreter` runs and is `version` (a pyenv shim of a version not selected fails)."""
    try:
        found = subprocess.run(
            [str(interpreter), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return found.returncode == 0 and found.stdout.strip() == version


def _inputs_digest(line: Line) -> str:
    digest = hashlib.sha256()
    for name in ("pyproject.toml", line.constraints):
        digest.update((REPO_ROOT / name).read_bytes())
    return digest.hexdigest()


def ensure_environment(interpreter: Path, version: str, line: Line) -> Path:
    """The virtualenv's python, (re)installed when pyproject.toml or the constraints changed."""
    venv = REPO_ROOT / f".venv-py{version}{line.suffix}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    digest = _inputs_digest(line)
    if stamp.exists() and stamp.read_text() == digest and python.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([str(interpreter), "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True, cwd=REPO_ROOT)
    subprocess.run(
        [*pip, "-c", line.constraints, "-e", f".[{line.extras}]", *line.packages], check=True, cwd=REPO_ROOT
    )
    stamp.write_text(digest)
    return python


def run_tests(python: Path, line: Line, pytest_args: list[str]) -> str:
    """pytest's summary ("1486 passed, 5 skipped in ..."), its output passed through as it comes."""
    command = [str(python), "-m", "pytest", "-q", *pytest_args, *line.tests]
    print("$", " ".join(command), flush=True)
    last = ""
    with subprocess.Popen(
        command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for output in process.stdout:
            sys.stdout.write(output)
            sys.stdout.flush()
            last = output if output.strip() else last
    summary = last.strip().strip("= ") or "no output"
    return summary if process.returncode == 0 else f"FAILED (exit {process.returncode}): {summary}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated versions (3.X) to run, of those claimed")
    parser.add_argument(
        "--line", choices=sorted(LINES), action="append", help="SDK line(s): 2, 1 (default both)"
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    versions = claimed_pythons()
    if args.only:
        wanted = set(args.only.split(","))
        versions = [version for version in versions if version in wanted]
    lines = [LINES[key] for key in (args.line or ["2", "1"])]
    runs: list[Run] = []
    missing = []
    for version in versions:
        interpreter = find_interpreter(version)
        if interpreter is None:
            missing.append(version)
            continue
        for line in lines:
            print(f"== Python {version} ({interpreter}), {line.name}", flush=True)
            started = time.monotonic()
            try:
                python = ensure_environment(interpreter, version, line)
                outcome = run_tests(python, line, args.pytest_args)
            except subprocess.CalledProcessError as exc:
                outcome = f"FAILED to install ({exc.cmd[-1] if exc.cmd else exc})"
            runs.append(Run(version, line.name, outcome, time.monotonic() - started))
    print("\n| Python | SDK line | result | seconds |\n|---|---|---|---:|")
    for run in runs:
        print(f"| {run.python} | {run.line} | {run.outcome} | {run.seconds:.0f} |")
    if missing:
        print(f"\nClaimed but not on this machine: {', '.join(missing)}")
    return 1 if any(run.outcome.startswith("FAILED") for run in runs) or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
