# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The instrumented-call benchmark's 1 MB bound: a median ratio with its interval over rounds."""

from __future__ import annotations

from tests.bench.instrumented import (
    FULL,
    RATIO_BOUND,
    SIZES,
    Cell,
    ratio_over,
    ratio_state,
    ratio_verdict,
)


def _cell(ratios: list[float]) -> Cell:
    """A 1 MB cell whose round i has instrumented calls `ratios[i]` times the plain ones."""
    cell = Cell("1 MB", SIZES["1 MB"], "stdio", FULL[SIZES["1 MB"]], 0.25)
    for index, ratio in enumerate(ratios):
        plain = [0.010 + 0.0001 * k + 0.001 * index for k in range(9)]
        cell.blocks["uninstrumented"].append(plain)
        cell.blocks["instrumented"].append([value * ratio for value in plain])
    return cell


def test_a_ratio_over_the_bound_in_every_round_fails_the_run() -> None:
    result = _cell([1.25, 1.3, 1.22, 1.28, 1.24, 1.3]).stats()
    low, high = result["median_ratio_interval"]
    assert RATIO_BOUND < low <= result["median_ratio"] <= high
    assert ratio_state(result) == "over"
    assert ratio_over([result]) == [result]
    assert "over" in ratio_verdict([result])


def test_a_median_over_the_bound_whose_rounds_disagree_is_unresolved_and_does_not_fail() -> None:
    result = _cell([1.02, 1.25, 1.04, 1.3, 1.03, 1.28, 1.2]).stats()
    assert result["median_ratio"] > RATIO_BOUND
    assert result["median_ratio_interval"][0] <= RATIO_BOUND
    assert ratio_state(result) == "unresolved"
    assert ratio_over([result]) == []
    assert "Unresolved" in ratio_verdict([result])


def test_a_ratio_within_the_bound_is_ok() -> None:
    result = _cell([1.02, 1.05, 1.01, 1.04]).stats()
    assert ratio_state(result) == "ok" and ratio_over([result]) == []
    assert "ok)" in ratio_verdict([result])


def test_other_sizes_are_not_bounded() -> None:
    cell = _cell([1.5, 1.6, 1.55])
    cell.label = "1 KB"
    assert ratio_over([cell.stats()]) == []
