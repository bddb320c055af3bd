# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The saturation benchmark's verdict: paired rounds, and what it says when none ran."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.bench.saturation import Run, judge, paired_ratio, throughput_line


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
    assert "throughput 0.667 of plain" in judge(runs, 2).missed
