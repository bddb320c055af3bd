# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The README's performance table is built from the tables the benchmarks wrote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.bench.summary import NOT_MEASURED, claude, guard, instructions, saturation, startup, write_summary

PERFORMANCE = """# Performance

<!-- bench:worker-cost -->
`python -m tests.bench.worker_cost`

| tool result | rounds apart | exchanges | this process, ms CPU | counting service, ms CPU |
|-------------|-------------:|----------:|---------------------:|-------------------------:|
| 1 KB        |        10 ms |      2000 |                0.174 |                    0.205 |
| 1 MB        |        10 ms |        20 |                2.606 |                   83.000 |
| 1 KB        |         0 ms |      2000 |                0.301 |                    0.205 |

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
    assert "| CPU per counted exchange in the application, 1 KB / 1 MB result" in text
    assert "0.174 / 2.606 ms" in text and "0.205 / 83.000 ms" in text
    assert "0.301" not in text  # the rows without batching are the benchmark's, not the summary's
    assert "Measured on: Some CPU, 2 cores, 24 GiB, Linux 6.1, Python 3.11.7, mcp 2.3.0." in text
    # Benchmarks that wrote nothing say so rather than keep stale figures.
    assert re.search(r"\| \(instrumented benchmark\) +\| not measured +\|", text)
    assert text.count(NOT_MEASURED) == 9


def test_a_readme_without_the_section_is_an_error(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    performance = tmp_path / "performance.md"
    performance.write_text(PERFORMANCE)
    with pytest.raises(ValueError, match="bench:summary"):
        write_summary(readme, performance)


STARTUP = """`python -m tests.bench.startup`

| process | runs | CPU added ms, median of rounds (90%) | A/A ms (90%) | fastest I - fastest U ms | bound |
|---------|-----:|-------------------------------------:|-------------:|-------------------------:|-------|
| MCP server | 30 | 41.2 (25.9 .. 57.4) | 3.0 (-20.1 .. 19.5) | 34.7 | unresolved |

| mcp-tokens' own code, inside the process | runs | median CPU ms | min | max | bound |
|------------------------------------------|-----:|--------------:|----:|----:|-------|
| MCP server: import, instrument(), patches | 30 | 31.0 | 26.3 | 46.7 | ok |
"""


CLAUDE = """`python -m tests.bench.claude`

| corpus | ours, steady | ctok | ours / ctok |
|--------|---:|---:|---:|
| prose | 13.4 | 0.20 | 67x |
| cjk | 50.4 | 0.41 | 123x |

| check | measured | bound | ok |
|-------|---------:|------:|----|
| steady state, all corpora | 12.2 MB/s | >= 10 MB/s | ok |
| memory, claude-4.7 (ours) | 27.6 MB PSS | <= 100 MB | ok |
| memory, tiktoken o200k_base | 55.2 MB PSS | | |
"""


def test_claude_quotes_the_steady_rate_its_speed_over_ctok_and_its_memory() -> None:
    assert claude(CLAUDE) == [
        (
            "Claude counts (claude-4.7, equal to ctok's), steady state, all corpora",
            "12.2 MB/s (67x .. 123x ctok's speed)",
        ),
        ("a loaded Claude tokenizer, its caches filled", "claude-4.7 (ours) 27.6 MB PSS"),
    ]


def test_start_up_quotes_the_inside_measurement_then_the_whole_process_rounds_beside_their_noise() -> None:
    assert startup(STARTUP) == [
        (
            "mcp-tokens' own start-up CPU in an MCP server (import, `instrument()`, patches)",
            "31.0 ms median (26.3 .. 46.7)",
        ),
        (
            "whole-process start-up CPU added, median of rounds (90% interval; A/A: the machine's own "
            "noise, measured alike)",
            "MCP server: 41.2 (25.9 .. 57.4) ms (A/A 3.0 (-20.1 .. 19.5))",
        ),
    ]


THROUGHPUT_OK = (
    "Instrumented throughput over plain (median of the rounds' ratios): 0.980 "
    "(90% interval 0.930 .. 1.020; floor 0.95): ok."
)
SATURATION = f"""`python -m tests.bench.saturation`

| variant (in the order run) | calls/s | calls | server CPU per call, ms |
|----------------------------|--------:|------:|------------------------:|
| plain                      |     151 | 1,519 |                    8.18 |
| instrumented               |     148 | 1,490 |                    8.40 |

{THROUGHPUT_OK}

| run | calls/s | calls | recorded | tokens received | recorded sum | exact | last count, s |
|-----|--------:|------:|---------:|----------------:|-------------:|------:|--------------:|
| 1   |     148 | 1,900 |    1,900 |       7,121,630 |       +0.00% |   93% |             4 |
"""


def test_saturation_quotes_the_ratio_and_whether_every_response_was_recorded() -> None:
    assert saturation(SATURATION) == [
        (
            "a saturated 2-worker gunicorn server, throughput instrumented / plain",
            "0.980 (90% interval 0.930 .. 1.020; floor 0.95): ok",
        ),
        ("the same, counts and token sums", "every response recorded; sums +0.00%; counted exactly 93%"),
    ]


GUARD = """`python -m tests.bench.guard`

| tools/call in memory | median off ms | median on ms | ratio (median of rounds) | A/A off/off (90%) | bound |
|---|---:|---:|---:|---|---|
| 1 KB result (fits by size) | 1.930 | 1.990 | 1.031 | 1.004 (0.950 .. 1.060) | <= 1.1: ok |
| 20 KB result (fits by size) | 3.350 | 3.450 | 1.030 | 0.990 (0.940 .. 1.050) | <= 1.1: ok |
| 60 KB result (counted on both sides) | 8.247 | 10.839 | 1.327 | 1.010 (0.960 .. 1.070) | |

A 20 MB result cut to 25,000 tokens: 21.7 ms of CPU (best of 5; bound 500 ms), 25,000 tokens delivered.
"""


def test_guard_quotes_each_bounded_size_and_the_cut() -> None:
    assert guard(GUARD) == [
        (
            "a tool call with the guard on, result within the limit",
            "median ×1.031 (1 KB; A/A 1.004 (0.950 .. 1.060)), ×1.030 (20 KB; A/A 0.990 (0.940 .. 1.050))",
        ),
        ("the guard cutting a 20 MB result to 25,000 tokens", "21.7 ms CPU"),
    ]


INSTRUCTIONS = """`python -m tests.bench.instructions`

| variant      | M instructions per call | over plain |
|--------------|------------------------:|-----------:|
| plain        |                   11.26 |          - |
| patches      |                   11.51 |      +2.2% |
| instrumented |                   12.78 |     +13.5% |

The analysis adds 1.27 M instructions per exchange.
"""


def test_instructions_quote_the_instrumented_server_and_the_patches_alone_over_plain() -> None:
    assert instructions(INSTRUCTIONS) == [
        (
            "instructions per tool call (2-12 KB result), instrumented server",
            "+13.5% over plain (the patches alone +2.2%)",
        )
    ]
    assert instructions("`python -m tests.bench.instructions`\n\nvalgrind is not installed") == []


def test_instructions_quote_the_throughput_the_histogram_measurements_leave() -> None:
    body = INSTRUCTIONS + (
        "\nThe OpenTelemetry SDK spends 104 k instructions on a histogram measurement, and an "
        "instrumented call makes 4.0: 3.7% of a plain call. With the patches' +2.2%, a design that "
        "records them is bounded at 0.952 of plain's throughput, if throughput follows instructions, "
        "before a token is counted (the saturation floor: 0.95).\n"
    )
    assert instructions(body)[1] == (
        "throughput left at most by the OpenTelemetry SDK's histogram measurements",
        "0.952 of plain (they cost 3.7% of a plain call's instructions, the patches +2.2%)",
    )


def test_instructions_quote_the_context_switches_of_the_kernel_table() -> None:
    body = (
        INSTRUCTIONS
        + "\n\nWhat the kernel does for a call, which instructions do not count:\n\n"
        + "| variant      | voluntary switches per call | user CPU per call, ms | system CPU per call, ms |\n"
        + "|--------------|----------------------------:|----------------------:|------------------------:|\n"
        + "| plain        |                         2.0 |                  1.95 |                    0.09 |\n"
        + "| patches      |                         2.0 |                  2.05 |                    0.08 |\n"
        + "| instrumented |                        12.6 |                  2.70 |                    0.24 |\n"
    )
    assert instructions(body)[-1] == (
        "voluntary context switches per tool call (the analysis thread's GIL hand-overs)",
        "12.6 instrumented, 2.0 plain, 2.0 the patches alone",
    )
    assert all("switches" not in name for name, _ in instructions(INSTRUCTIONS))


def test_without_valgrind_the_kernel_table_alone_is_quoted() -> None:
    body = (
        "`python -m tests.bench.instructions`\n\nvalgrind is not installed (Debian: apt-get install"
        " valgrind): instruction counts skipped.\n\nWhat the kernel does for a call:\n\n"
        "| variant      | voluntary switches per call | user CPU per call, ms | system CPU per call, ms |\n"
        "|--------------|----------------------------:|----------------------:|------------------------:|\n"
        "| plain        |                         2.0 |                  1.95 |                    0.09 |\n"
        "| instrumented |                        12.6 |                  2.70 |                    0.24 |\n"
    )
    assert instructions(body) == [
        (
            "voluntary context switches per tool call (the analysis thread's GIL hand-overs)",
            "12.6 instrumented, 2.0 plain",
        )
    ]


def test_the_switches_name_the_analysis_thread_s_share_where_the_table_has_it() -> None:
    body = (
        "| variant      | voluntary switches per call | of them, the analysis thread's |\n"
        "|--------------|----------------------------:|-------------------------------:|\n"
        "| plain        |                         2.0 |                              - |\n"
        "| instrumented |                        13.2 |                           10.0 |\n"
    )
    assert instructions(body)[-1][1] == "13.2 instrumented (10.0 of them the analysis thread's), 2.0 plain"
