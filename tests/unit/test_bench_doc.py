# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""How a benchmark publishes its table: printed, and written into its section of a document."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench._doc import publish

DOCUMENT = "# Performance\n\n<!-- bench:demo -->\nold\n<!-- /bench:demo -->\n\nAfter.\n"


def test_publish_prints_and_replaces_only_its_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = tmp_path / "performance.md"
    document.write_text(DOCUMENT)
    publish("| a | b |", str(document), "demo", "tests.bench.demo", ["--rounds", "3", "--markdown", "x.md"])
    assert "| a | b |" in capsys.readouterr().out
    text = document.read_text()
    assert "old" not in text and text.endswith("<!-- /bench:demo -->\n\nAfter.\n")
    assert "`python -m tests.bench.demo --rounds 3`\n\n| a | b |\n\nMachine: " in text


def test_publish_without_a_document_only_prints(capsys: pytest.CaptureFixture[str]) -> None:
    publish("body", None, "demo", "tests.bench.demo", [])
    assert capsys.readouterr().out == "\nbody\n"


def test_a_document_without_the_section_is_an_error(tmp_path: Path) -> None:
    document = tmp_path / "performance.md"
    document.write_text("no sections\n")
    with pytest.raises(ValueError, match="no section"):
        publish("body", str(document), "demo", "tests.bench.demo", [])
