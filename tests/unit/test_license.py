# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The licence: LICENSE is the Apache License 2.0, pyproject.toml says so, and every Python file
carries the notice OpenTelemetry's contrib packages put at the top of theirs (a copyright line
and the SPDX identifier of the licence)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# SHA-256 of the Apache Software Foundation's LICENSE-2.0.txt, the text every Apache-2.0
# project ships (identical to Debian's /usr/share/common-licenses/Apache-2.0).
APACHE_2_0_SHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"
NOTICE = "# Copyright The mcp-tokens developers\n# SPDX-License-Identifier: Apache-2.0\n"
SOURCE_FOLDERS = ("instrumentation", "exporters", "tests", "examples")


def test_license_is_the_apache_license_2_0() -> None:
    text = (REPO_ROOT / "LICENSE").read_bytes()
    assert hashlib.sha256(text).hexdigest() == APACHE_2_0_SHA256
    assert b"Apache License\n                           Version 2.0, January 2004" in text


def test_pyproject_declares_the_license_and_ships_the_file() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert re.search(r'^license = "Apache-2.0"$', pyproject, re.MULTILINE)
    assert re.search(r'^license-files = \["LICENSE"\]$', pyproject, re.MULTILINE)
    assert '"License :: OSI Approved :: Apache Software License"' in pyproject


def python_files() -> list[str]:
    return sorted(
        str(path.relative_to(REPO_ROOT))
        for folder in SOURCE_FOLDERS
        for path in (REPO_ROOT / folder).rglob("*.py")
        if not any(
            part.startswith(".") or part == "__pycache__" for part in path.relative_to(REPO_ROOT).parts
        )
    )


def _carries_notice(text: str) -> bool:
    if text.startswith("#!"):
        text = text.partition("\n")[2]
    return text.startswith(NOTICE)


@pytest.mark.parametrize("path", python_files())
def test_every_python_file_starts_with_the_notice(path: str) -> None:
    assert _carries_notice((REPO_ROOT / path).read_text(encoding="utf-8")), f"{path} lacks:\n{NOTICE}"
