# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Responses hosts would refuse: counted from the payload histogram in the report, its JSON,
every text format and the CI gate."""

from __future__ import annotations

import bisect
import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.exporter.mcp_tokens.report.hostcap import OverCap, over_cap
from opentelemetry.exporter.mcp_tokens.report.model import Report, build_report
from opentelemetry.exporter.mcp_tokens.report.prometheus import snapshot_from_text
from opentelemetry.exporter.mcp_tokens.report.render_html import render_html
from opentelemetry.exporter.mcp_tokens.report.render_json import render_json
from opentelemetry.exporter.mcp_tokens.report.render_markdown import render_markdown
from opentelemetry.exporter.mcp_tokens.report.render_terminal import render_text
from opentelemetry.exporter.mcp_tokens.report.series import Histogram
from opentelemetry.exporter.mcp_tokens.report.settings import ReportSettings
from opentelemetry.instrumentation.mcp_tokens.semconv import HOST_RESULT_CAP, TOKEN_BUCKETS

SERVER = "git"
# Response sizes per (method, tool): git_diff twice over the cap, git_log exactly at it (a host
# accepts that), a resource read once over, a listing over it (definitions are not results).
RESPONSES: dict[tuple[str, str], list[int]] = {
    ("tools/call", "git_diff"): [30_000, 171_718, 2_000, 900, 24_000],
    ("tools/call", "git_log"): [25_000, 12_000],
    ("tools/call", "git_status"): [40, 55, 61],
    ("resources/read", ""): [26_000],
    ("tools/list", ""): [40_000],
}


def histogram(values: list[int], bounds: tuple[float, ...] = tuple(map(float, TOKEN_BUCKETS))) -> Histogram:
    counts = [0] * (len(bounds) + 1)
    for value in values:
        counts[bisect.bisect_left(bounds, value)] += 1  # (bounds[i-1], bounds[i]]
    return Histogram(len(values), float(sum(values)), bounds, tuple(counts))


def exposition() -> str:
    lines = ["# TYPE mcp_tokens_payload histogram"]
    for (method, tool), values in RESPONSES.items():
        labels = (
            f'mcp_tokens_server_name="{SERVER}",mcp_tokens_side="server",mcp_method_name="{method}",'
            f'mcp_tokens_direction="response"' + (f',gen_ai_tool_name="{tool}"' if tool else "")
        )
        for bound in TOKEN_BUCKETS:
            at_or_under = sum(1 for v in values if v <= bound)
            lines.append(f'mcp_tokens_payload_bucket{{{labels},le="{bound}"}} {at_or_under}')
        lines += [
            f'mcp_tokens_payload_bucket{{{labels},le="+Inf"}} {len(values)}',
            f"mcp_tokens_payload_count{{{labels}}} {len(values)}",
            f"mcp_tokens_payload_sum{{{labels}}} {sum(values)}",
        ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def report() -> Report:
    return build_report(snapshot_from_text(exposition()))


def test_the_default_cap_is_a_bucket_bound_so_the_count_is_exact() -> None:
    assert HOST_RESULT_CAP in TOKEN_BUCKETS
    assert over_cap(histogram([30_000, 171_718, 2_000, 25_000]), HOST_RESULT_CAP) == OverCap(2, 2)


def test_a_cap_between_bounds_gives_a_range_unless_the_maximum_settles_it() -> None:
    values = [20_000, 30_000, 70_000]
    assert over_cap(histogram(values), 21_000) == OverCap(2, 3)  # 20,000 shares (16384, 25000]
    assert over_cap(histogram([100, 200]), 150) == OverCap(0, 2)
    known_max = Histogram(2, 300.0, (1000.0,), (2, 0), minimum=100.0, maximum=200.0)
    assert over_cap(known_max, 250) == OverCap(0, 0)
    assert over_cap(histogram([]), 10) == OverCap(0, 0)
    malformed = Histogram(5, 0.0, (10.0,), (1, 2, 2))  # more counts than bounds + 1
    assert over_cap(malformed, 10) == OverCap(4, 4)
    assert over_cap(Histogram(2, 0.0, (), (2,)), 10) == OverCap(0, 2)


@given(
    values=st.lists(st.integers(min_value=0, max_value=2_000_000), max_size=60),
    cap=st.integers(min_value=1, max_value=2_000_000),
)
def test_the_true_count_is_always_within_the_range(values: list[int], cap: int) -> None:
    over = over_cap(histogram(values), cap)
    true = sum(1 for v in values if v > cap)
    assert over.low <= true <= over.high
    if cap in TOKEN_BUCKETS:
        assert over.low == over.high == true


def test_the_report_names_every_result_over_the_cap(report: Report) -> None:
    capped = report.host_cap
    assert capped is not None and capped.tokens == HOST_RESULT_CAP
    found = {(r.row.method, r.row.target): (r.over.low, r.row.calls) for r in capped.rows}
    assert found == {("tools/call", "git_diff"): (2, 5), ("resources/read", ""): (1, 1)}
    assert capped.summary() == "3 responses over 25,000 tokens (git_diff 2 of 5, resources/read 1 of 1)"
    assert report.verdict.passed  # counting is not gating


def test_json_has_the_same_numbers(report: Report) -> None:
    document = json.loads(render_json(report))["host_cap"]
    assert (document["tokens"], document["responses_over"], document["responses_over_max"]) == (25_000, 3, 3)
    assert document["exact"] is True
    diff = document["operations"][0]
    assert (diff["target"], diff["calls"], diff["over"], diff["over_max"], diff["exact"]) == (
        "git_diff",
        5,
        2,
        2,
        True,
    )
    # Prometheus text has no max: the smallest bucket bound that holds 171,718
    assert (diff["max"], diff["max_exact"]) == (262_144, False)


def test_every_format_says_it(report: Report) -> None:
    sentence = "Responses hosts would refuse: 3 responses over 25,000 tokens (git_diff 2 of 5"
    for text in (render_text(report, 100, width=250), render_markdown(report, 100), render_html(report, 100)):
        assert sentence in text
        assert "Responses hosts would refuse: over 25,000 tokens (Claude Code" in text  # ' is escaped in HTML


def test_the_gate_fails_the_run_with_one_failure_per_operation() -> None:
    report = build_report(snapshot_from_text(exposition()), fail_on_host_cap=True, fail_exit_code=4)
    verdict = report.verdict
    assert (verdict.passed, verdict.exit_code, verdict.fail_on_host_cap) == (False, 4, True)
    assert [(f.rule, f.target, f.detail) for f in verdict.failures] == [
        ("host_cap", "git_diff", "2 of 5 responses over 25,000 tokens"),
        ("host_cap", "", "1 of 1 responses over 25,000 tokens"),
    ]
    assert "FAILED (responses over 25,000 tokens): exit code 4" in render_text(report, 100, width=250)


def test_a_higher_cap_passes_the_gate() -> None:
    report = build_report(snapshot_from_text(exposition()), host_cap_tokens=262_144, fail_on_host_cap=True)
    assert report.verdict.passed
    assert report.host_cap is not None and report.host_cap.summary() == "no response over 262,144 tokens"


def test_settings(caplog: pytest.LogCaptureFixture) -> None:
    prefix = "OTEL_EXPORTER_MCP_TOKENS_REPORT_"
    defaults = ReportSettings.from_env({}, pid=1)
    assert (defaults.host_cap, defaults.fail_on_host_cap, defaults.gates) == (25_000, False, False)
    gated = ReportSettings.from_env(
        {prefix + "HOST_CAP": "100000", prefix + "FAIL_ON_HOST_CAP": "true"}, pid=1
    )
    assert (gated.host_cap, gated.fail_on_host_cap, gated.gates) == (100_000, True, True)
    assert ReportSettings.from_env({prefix + "HOST_CAP": "0"}, pid=1).host_cap == 0
    with caplog.at_level(logging.WARNING):
        assert ReportSettings.from_env({prefix + "HOST_CAP": "lots"}, pid=1).host_cap == 25_000
    assert "HOST_CAP" in caplog.text


def test_a_cap_of_zero_is_not_checked() -> None:
    report = build_report(snapshot_from_text(exposition()), host_cap_tokens=None, fail_on_host_cap=True)
    assert report.host_cap is None and report.verdict.passed
    assert json.loads(render_json(report))["host_cap"] is None
    assert "hosts would refuse" not in render_text(report, 100, width=250)
