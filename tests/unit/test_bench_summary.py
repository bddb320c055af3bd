# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The README's performance table is built from the tables the benchmarks wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.bench.summary import NOT_MEASURED, startup, write_summary

PERFORMANCE = """# Performance

<!-- bench:worker-cost -->
`python -m tests.bench.worker_cost`

| tool result | exchanges | this process, ms CPU | helper, ms CPU |
|-------------|----------:|---------------------:|---------------:|
| 1 KB        |      2000 |                0.174 |          0.205 |
| 1 MB        |        20 |                2.606 |         83.000 |

Machine: Some CPU, 2 cores, 24 GiB, Linux 6.1, Python 3.11.7, mcp 2.3.0.
<!-- /bench:worker-cost -->
"""


def test_the_summary_quotes_the_benchmark_tables_and_their_machine(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- bench:summary -->\nold\n<!-- /bench:summary -->\n\nafter\n")
    performance = tmp_path / "performance.md"
    performance.write_text(PERFORMANCE)
    write_summary(readme, performance)
    text = readme.read_text()
    assert "old" not in text and text.endswith("after\n")
    assert "| CPU per analysed exchange in the application, 1 KB / 1 MB result" in text
    assert "0.174 / 2.606 ms" in text and "0.205 / 83.000 ms" in text
    assert "Measured on: Some CPU, 2 cores, 24 GiB, Linux 6.1, Python 3.11.7, mcp 2.3.0." in text
    # Benchmarks that wrote nothing say so rather than keep stale figures.
    assert re.search(r"\| \(instrumented benchmark\) +\| not measured +\|", text)
    assert text.count(NOT_MEASURED) == 5


def test_a_readme_without_the_section_is_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    performance = tmp_path / "performance.md"
    performance.write_text(PERFORMANCE)
    with pytest.raises(ValueError, match="bench:summary"):
        write_summary(readme, performance)


STARTUP = """`python -m tests.bench.startup`

| process | runs | CPU added ms, median of pairs (90%) | fastest I - fastest U ms | bound |
|---------|-----:|------------------------------------:|-------------------------:|-------|
| MCP server | 30 | 41.2 (25.9 .. 57.4) | 34.7 | unresolved |

| mcp-tokens' own code, inside the process | runs | median CPU ms | min | max | bound |
|------------------------------------------|-----:|--------------:|----:|----:|-------|
| MCP server: import, instrument(), patches | 30 | 31.0 | 26.3 | 46.7 | ok |
"""


def test_start_up_quotes_the_inside_measurement_then_the_whole_process_pairs() -> None:
    assert startup(STARTUP) == [
        (
            "mcp-tokens' own start-up CPU in an MCP server (import, `instrument()`, patches)",
            "31.0 ms median (26.3 .. 46.7)",
        ),
        (
            "whole-process start-up CPU added, median of pairs (90% interval)",
            "MCP server: 41.2 (25.9 .. 57.4) ms",
        ),
    ]
