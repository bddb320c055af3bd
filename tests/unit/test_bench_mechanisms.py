# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The mechanisms benchmark: its rows and the worker it measures without its wake-up."""

from __future__ import annotations

from opentelemetry.instrumentation.mcp_tokens.worker import AnalysisWorker

from tests.bench.mechanisms import render, slicing_row, wake_up_row, woken_at_once


def test_a_wake_up_row_is_the_medians_and_their_ratio_with_its_interval() -> None:
    with_loop = [[0.0010, 0.0011, 0.0012]] * 4
    at_once = [[0.0012, 0.0013, 0.0014]] * 4
    label, with_ms, without_ms, ratio = wake_up_row("1 KB", with_loop, at_once)
    assert (label, with_ms, without_ms) == ("1 KB", "1.100", "1.300")
    assert ratio == "1.182 (1.182 .. 1.182)"  # every round alike: no spread


def test_a_slicing_row_is_the_median_worst_each_way() -> None:
    assert slicing_row("tools/list", [0.004, 0.005, 0.006], [0.007, 0.008, 0.009]) == [
        "tools/list",
        "5.00",
        "8.00",
        "1.60",
    ]


def test_the_report_has_both_tables() -> None:
    body = render(
        [["1 KB", "1.1", "1.3", "1.18 (1.1 .. 1.2)"]], [["tools/list", "5.00", "8.00", "1.60"]], 60, 8
    )
    assert "8 rounds of 60 in-memory tool calls 20 ms apart" in body
    assert "| 1 KB" in body and "| tools/list" in body and "with (0.5 ms), worst ms" in body


def test_without_the_wake_up_the_worker_is_woken_at_once_and_it_comes_back() -> None:
    scheduled = AnalysisWorker._wake_later
    with woken_at_once(True):
        assert AnalysisWorker._wake_later is not scheduled
        assert AnalysisWorker._wake_later(object()) is False  # type: ignore[arg-type]
    assert AnalysisWorker._wake_later is scheduled
    with woken_at_once(False):
        assert AnalysisWorker._wake_later is scheduled
