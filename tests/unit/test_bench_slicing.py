# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The GIL-slicing benchmark: its rows and its report."""

from __future__ import annotations

from opentelemetry.instrumentation.mcp_tokens.counting.options import OPTIONS

from tests.bench.loop_stall import cases
from tests.bench.slicing import CASES, WITHOUT_SLICING, render, row


def test_a_row_is_the_median_worst_each_way_and_their_ratio() -> None:
    assert row("tools/list", [0.004, 0.005, 0.006], [0.007, 0.008, 0.009]) == [
        "tools/list",
        "5.00",
        "8.00",
        "1.60",
    ]


def test_the_report_names_the_slice_and_the_rounds() -> None:
    body = render([["tools/list", "5.00", "8.00", "1.60"]], 12)
    assert "median over 12 rounds" in body
    assert "| tools/list" in body and f"with ({OPTIONS.slice_s * 1000:g} ms), worst ms" in body


def test_without_slicing_only_the_slice_differs_and_every_case_exists() -> None:
    assert WITHOUT_SLICING._replace(slice_s=OPTIONS.slice_s) == OPTIONS
    assert WITHOUT_SLICING.slice_s > 60
    assert set(CASES) <= {case.name for case in cases(False)}
