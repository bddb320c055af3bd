# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The saturation benchmark's verdict: paired rounds, and what it says when none ran."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.bench.saturation import Run, judge, paired_ratio, progress_line, render, throughput_line


def _run(variant: str, calls: int) -> Run:
    return Run(variant, calls, 10.0, Counter())


def test_the_ratio_is_the_median_over_rounds_of_each_rounds_own_ratio() -> None:
    runs = [
        _run("plain", 3000),
        _run("instrumented", 2700),  # 0.9
        _run("instrumented", 1000),
        _run("plain", 1000),  # 1.0: a slow spell that hit the whole round
        _run("plain", 2000),
        _run("instrumented", 1900),  # 0.95
    ]
    assert paired_ratio(runs, 2) == pytest.approx(0.95)


def test_no_pair_means_no_ratio_and_no_throughput_verdict() -> None:
    runs = [_run("instrumented", 2000), _run("instrumented", 2100)]
    assert paired_ratio(runs, 1) is None
    assert not any("throughput" in missed for missed in judge(runs, 1).missed)
    assert "not measured" in throughput_line(None)


def test_a_ratio_under_the_floor_is_a_miss() -> None:
    runs = [_run("plain", 3000), _run("instrumented", 2000)]
    verdict = judge(runs, 2)
    assert verdict.throughput is not None and verdict.throughput.verdict == "under"
    assert "throughput 0.667 of plain (0.667 .. 0.667)" in verdict.missed


def _rounds(*ratios: float) -> list[Run]:
    runs = []
    for ratio in ratios:
        runs += [_run("plain", 2000), _run("instrumented", round(2000 * ratio))]
    return runs


def test_rounds_that_all_fall_short_are_a_miss() -> None:
    verdict = judge(_rounds(0.80, 0.84, 0.78, 0.86), 2)
    assert verdict.throughput is not None
    assert verdict.throughput.verdict == "under" and verdict.throughput.high < 0.95
    assert any(missed.startswith("throughput 0.820 of plain") for missed in verdict.missed)


def test_a_median_under_the_floor_with_rounds_on_both_sides_is_unresolved_not_a_miss() -> None:
    # Rounds a minute apart on a shared machine: 0.88 .. 1.12 around a median of 0.94.
    verdict = judge(_rounds(0.88, 0.92, 0.96, 1.12), 2)
    assert verdict.throughput is not None
    assert verdict.throughput.ratio == pytest.approx(0.94)
    assert verdict.throughput.low < 0.95 <= verdict.throughput.high
    assert verdict.throughput.verdict == "unresolved"
    assert not any("throughput" in missed for missed in verdict.missed)
    assert "cannot tell whether 0.95 is held" in throughput_line(verdict.throughput)


def test_a_median_at_the_floor_is_ok_whatever_the_spread() -> None:
    verdict = judge(_rounds(0.80, 0.95, 0.97, 1.20), 2)
    assert verdict.throughput is not None and verdict.throughput.verdict == "ok"
    assert verdict.missed == []
    assert throughput_line(verdict.throughput).endswith("floor 0.95): ok.")


def test_a_run_without_the_instrumented_variant_renders_the_rates_alone() -> None:
    runs = [_run("plain", 3000), _run("local", 2900)]
    body = render(runs, judge(runs, 2))
    assert "| local " in body
    assert "not measured" in body
    assert "recorded sum" not in body


def test_progress_names_what_a_counted_variant_recorded() -> None:
    run = _run("local", 3000)
    run.recorded, run.exact, run.seeds = 3000, 120, Counter({1: 3000})
    assert progress_line(run).endswith("3,000 of 3,000 recorded, 120 exactly")
    assert "recorded" not in progress_line(_run("plain", 3000))
