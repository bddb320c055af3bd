# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""mcp-tokens.lock.json: stable bytes, round trip, atomic writes, and a clear error for every bad file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.cli import lockfile
from opentelemetry.exporter.mcp_tokens.cli.errors import CliError, ExitCode
from opentelemetry.exporter.mcp_tokens.cli.lockfile import Lock, ToolLock
from opentelemetry.exporter.mcp_tokens.cli.profile import Settings
from opentelemetry.exporter.mcp_tokens.cli.static import Assumptions, Bound
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds, RiskTier

LOCK = Lock(
    server_name="shop",
    server_version="2.0.1",
    settings=Settings(
        encoding="cl100k_base",
        risk=RiskThresholds(500, 2000, 6000),
        assumptions=Assumptions(
            chars_per_token=2.5, unbounded_items=40, unbounded_string_chars=300, text_copy=False
        ),
    ),
    tools={
        "zeta": ToolLock(12, Bound.UNKNOWN, None, None, "sha256:" + "0" * 64),
        "alpha": ToolLock(340, Bound.UNBOUNDED, 41_000, RiskTier.CRITICAL, "sha256:" + "1" * 64),
    },
)


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    path = tmp_path / "mcp-tokens.lock.json"
    lockfile.write(LOCK, path)
    read = lockfile.read(path)
    assert read == Lock(**{**LOCK.__dict__, "source": str(path)})


def test_bytes_are_stable_sorted_and_end_with_a_newline() -> None:
    text = lockfile.to_json(LOCK)
    assert text == lockfile.to_json(
        Lock(LOCK.server_name, LOCK.server_version, LOCK.settings, dict(reversed(LOCK.tools.items())))
    )
    document = json.loads(text)
    assert list(document) == sorted(document)
    assert list(document["tools"]) == ["alpha", "zeta"]
    assert document["format"] == "mcp-tokens.lock" and document["version"] == 1
    assert document["totals"] == {"tools": 2, "definition_tokens": 352}
    assert document["tools"]["zeta"] == {
        "bound": "unknown",
        "definition_tokens": 12,
        "digest": "sha256:" + "0" * 64,
        "risk": None,
        "worst_case_tokens": None,
    }
    assert text.endswith("}\n") and "\r" not in text


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "mcp-tokens.lock.json"
    path.write_text("previous contents\n", encoding="utf-8")
    os.chmod(tmp_path, 0o500)  # the directory refuses the temporary file
    try:
        if os.access(tmp_path, os.W_OK):  # root ignores permissions: use a missing directory instead
            path = tmp_path / "missing" / "mcp-tokens.lock.json"
        with pytest.raises(CliError) as raised:
            lockfile.write(LOCK, path)
    finally:
        os.chmod(tmp_path, 0o700)
    assert raised.value.code is ExitCode.WRITE_FAILED
    assert raised.value.message.startswith(f"cannot write {path}: ")
    assert (tmp_path / "mcp-tokens.lock.json").read_text(encoding="utf-8") == "previous contents\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mcp-tokens.lock.json"]


def valid_document() -> dict[str, Any]:
    return json.loads(lockfile.to_json(LOCK))  # type: ignore[no-any-return]


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "lock.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("mutate", "code", "message"),
    [
        (
            lambda d: d.update(version=2),
            ExitCode.LOCK_INCOMPATIBLE,
            "lock file format version 2 is not supported",
        ),
        (lambda d: d.update(version="1"), ExitCode.LOCK_INVALID, 'version: expected an integer, got "1"'),
        (lambda d: d.update(format="other"), ExitCode.LOCK_INVALID, "not an mcp-tokens lock file"),
        (
            lambda d: d["tools"]["alpha"].update(risk="extreme"),
            ExitCode.LOCK_INVALID,
            "tools.alpha.risk: expected",
        ),
        (
            lambda d: d["tools"]["alpha"].update(bound=None),
            ExitCode.LOCK_INVALID,
            "tools.alpha.bound: expected",
        ),
        (
            lambda d: d["tools"]["zeta"].update(definition_tokens=-1),
            ExitCode.LOCK_INVALID,
            "tools.zeta.definition_tokens: expected a non-negative integer, got -1",
        ),
        (lambda d: d["tools"]["zeta"].update(digest="md5:x"), ExitCode.LOCK_INVALID, "tools.zeta.digest"),
        (
            lambda d: d["settings"].update(risk_thresholds=[3, 2, 1]),
            ExitCode.LOCK_INVALID,
            "settings.risk_thresholds",
        ),
        (
            lambda d: d["settings"]["assumptions"].pop("text_copy"),
            ExitCode.LOCK_INVALID,
            "settings.assumptions",
        ),
        (lambda d: d.update(tools=[]), ExitCode.LOCK_INVALID, "tools: expected an object, got []"),
    ],
)
def test_invalid_documents_name_the_bad_field(
    tmp_path: Path, mutate: Any, code: ExitCode, message: str
) -> None:
    document = valid_document()
    mutate(document)
    path = write(tmp_path, document)
    with pytest.raises(CliError) as raised:
        lockfile.read(path)
    assert raised.value.code is code
    assert raised.value.message.startswith(f"{path}: ")
    assert message in raised.value.message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[]", "the document: expected an object"),
        (b"\xff\xfe", "not UTF-8 text"),
    ],
)
def test_unreadable_files(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "lock.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(CliError) as raised:
        lockfile.read(path)
    assert raised.value.code is ExitCode.LOCK_INVALID
    assert message in raised.value.message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(CliError) as raised:
        lockfile.read(tmp_path / "nope.json")
    assert raised.value.code is ExitCode.LOCK_INVALID
    assert raised.value.message == f"cannot read {tmp_path / 'nope.json'}: No such file or directory"


def test_a_failure_after_writing_the_temporary_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcp-tokens.lock.json"
    path.write_text("previous contents\n", encoding="utf-8")

    def refuse(source: str, destination: object) -> None:
        assert Path(source).read_text(encoding="utf-8") == lockfile.to_json(LOCK)  # fully written first
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lockfile.os, "replace", refuse)
    with pytest.raises(CliError) as raised:
        lockfile.write(LOCK, path)
    assert raised.value.message == f"cannot write {path}: No space left on device"
    assert path.read_text(encoding="utf-8") == "previous contents\n"
    assert [p.name for p in tmp_path.iterdir()] == ["mcp-tokens.lock.json"]
