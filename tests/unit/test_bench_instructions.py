# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instruction-count benchmark: reading cachegrind's summary and splitting the analysis."""

from __future__ import annotations

import pytest

from tests.bench import instructions as bench
from tests.bench.instructions import (
    Kernel,
    Measured,
    instructions,
    kernel_costs,
    kernel_of,
    measurement_bound,
    measurements,
    render,
    render_kernel,
)

SUMMARY = """==10322== Cachegrind, a high-precision tracing profiler
==10322== Command: python -m tests.bench._instructions_child instrumented 110
==10322==
==10322== I   refs:      5,205,552,539
"""


def test_the_count_is_read_from_cachegrind_s_summary() -> None:
    assert instructions(SUMMARY) == 5_205_552_539


def test_an_output_without_a_count_is_an_error_that_shows_it() -> None:
    with pytest.raises(RuntimeError, match="Traceback"):
        instructions("Traceback (most recent call last):\n  ...")


def test_the_analysis_is_split_by_the_variants_that_take_a_part_away() -> None:
    body = render(
        {
            "plain": 11.36e6,
            "patches": 11.50e6,
            "instrumented": 12.78e6,
            "no-metrics": 12.34e6,
            "no-wire": 11.60e6,
        }
    )
    assert "| instrumented |" in body and "+12.5%" in body and "+1.2%" in body
    assert "The analysis adds 1.28 M instructions per exchange" in body
    assert "the metrics: 0.44 M (34%)" in body
    assert "the wire and the recording: 1.18 M (92%)" in body


def test_plain_alone_is_a_table_without_a_split() -> None:
    body = render({"plain": 11.36e6})
    assert "11.36" in body and "analysis adds" not in body


def test_the_child_s_measurement_count_is_read_from_its_output() -> None:
    assert measurements(SUMMARY + "histogram measurements: 120\n") == 120
    with pytest.raises(RuntimeError, match="no measurement count"):
        measurements(SUMMARY)


def test_the_measurements_bound_what_a_design_that_records_them_can_keep() -> None:
    # 4 measurements of 100 k each on a 10 M call: 4%; with patches at +2%, 1 / 1.06.
    text = measurement_bound(10e6, 10.2e6, Measured(per_call=4, price=100e3))
    assert "100 k instructions on a histogram measurement" in text
    assert "makes 4.0" in text and "4.0% of a plain call" in text
    assert "bounded at 0.943 of plain's throughput" in text


def test_the_bound_follows_the_table_when_measured() -> None:
    costs = {"plain": 10e6, "patches": 10.2e6, "instrumented": 11.5e6}
    assert "bounded at" in render(costs, Measured(4, 100e3))
    assert "bounded at" not in render(costs)


def test_the_child_s_kernel_line_is_read_from_its_output() -> None:
    output = "histogram measurements: 80\nper call: switches 12.345 user 2.7500 system 0.2100\n"
    assert kernel_of(output) == Kernel(12.345, 2.75, 0.21)
    with pytest.raises(RuntimeError, match="no per-call line"):
        kernel_of("histogram measurements: 80\n")


def test_kernel_costs_are_medians_over_runs_that_take_turns(monkeypatch: pytest.MonkeyPatch) -> None:
    order: list[str] = []
    switches = {
        "plain": iter([2.0, 9.0, 2.2]),
        "patches": iter([2.1, 2.3, 2.2]),
        "instrumented": iter([14.0, 12.0, 30.0]),
    }

    def run_plainly(variant: str, calls: int) -> Kernel:
        order.append(variant)
        return Kernel(next(switches[variant]), 1.0, 0.1)

    monkeypatch.setattr(bench, "run_plainly", run_plainly)
    costs = kernel_costs(3)
    assert order[:6] == ["plain", "patches", "instrumented", "instrumented", "patches", "plain"]
    assert costs["plain"].switches == 2.2 and costs["instrumented"].switches == 14.0
    body = render_kernel(costs, 3)
    assert "| instrumented |" in body and "14.0" in body and "Medians over 3 runs" in body


def test_without_valgrind_the_kernel_s_table_is_still_measured(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    measured = {
        "plain": Kernel(2.0, 1.9, 0.1),
        "patches": Kernel(2.0, 2.0, 0.1),
        "instrumented": Kernel(12.0, 2.6, 0.2),
    }
    monkeypatch.setattr(bench, "kernel_costs", lambda runs: measured)
    assert bench.main(["--kernel-runs", "2"]) == 0
    out = capsys.readouterr().out
    assert "instruction counts skipped" in out
    assert "| instrumented |" in out and "12.0" in out and "Medians over 2 runs" in out


def test_the_analysis_thread_s_switches_are_read_and_shown_where_the_child_has_them() -> None:
    line = "per call: switches 12.100 user 2.7500 system 0.2100 analysis thread 10.500"
    assert kernel_of(line) == Kernel(12.1, 2.75, 0.21, 10.5)
    body = render_kernel({"plain": Kernel(2.0, 1.9, 0.1), "instrumented": kernel_of(line)}, 1)
    assert "of them, the analysis thread's" in body
    plain_row = next(row for row in body.splitlines() if row.startswith("| plain"))
    assert plain_row.split("|")[3].strip() == "-"
    assert "10.5" in next(row for row in body.splitlines() if row.startswith("| instrumented"))


def test_the_thread_s_median_is_over_the_runs_that_had_it(monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = iter([Kernel(12.0, 2.0, 0.2, 9.0), Kernel(14.0, 2.0, 0.2, None), Kernel(13.0, 2.0, 0.2, 11.0)])
    monkeypatch.setattr(bench, "KERNEL_VARIANTS", ("instrumented",))
    monkeypatch.setattr(bench, "run_plainly", lambda variant, calls: next(kernels))
    assert kernel_costs(3)["instrumented"] == Kernel(13.0, 2.0, 0.2, 10.0)
