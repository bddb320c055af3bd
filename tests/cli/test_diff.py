# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Every diff classification, on lock contents built by hand, and the exit code of the worst one."""

from __future__ import annotations

import dataclasses

import pytest
from opentelemetry.exporter.mcp_tokens.cli.diff import ChangeClass, compare
from opentelemetry.exporter.mcp_tokens.cli.errors import CliError, ExitCode
from opentelemetry.exporter.mcp_tokens.cli.lockfile import Lock, ToolLock
from opentelemetry.exporter.mcp_tokens.cli.profile import Settings
from opentelemetry.exporter.mcp_tokens.cli.static import Assumptions, Bound
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds, RiskTier

BASE = ToolLock(
    definition_tokens=200, bound=Bound.BOUNDED, worst_case_tokens=800, risk=RiskTier.LOW, digest="sha256:a"
)


def lock(source: str, settings: Settings | None = None, **tools: ToolLock) -> Lock:
    return Lock("server", "1", settings or Settings(), tools, source)


def changes(old: ToolLock | None, new: ToolLock | None) -> list[tuple[str, str, str]]:
    """(class, kind, message) of every change to tool `t`, padded so the server total stays put."""
    padding = ToolLock(10_000, Bound.BOUNDED, 10, RiskTier.LOW, "sha256:p")  # keeps total tax changes small
    before = lock("old.json", pad=padding, **({"t": old} if old else {}))
    after = lock("new.json", pad=padding, **({"t": new} if new else {}))
    result = compare(before, after)
    return [(c.change_class.value, c.kind, c.message) for c in result.changes if c.tool == "t"]


def test_tool_removed_is_breaking() -> None:
    assert changes(BASE, None) == [("breaking", "tool-removed", "tool removed: clients that call it fail")]


@pytest.mark.parametrize(
    ("added", "expected_class"),
    [
        (BASE, "safe"),
        (dataclasses.replace(BASE, worst_case_tokens=3_900, risk=RiskTier.MEDIUM), "safe"),
        (dataclasses.replace(BASE, worst_case_tokens=5_000, risk=RiskTier.HIGH), "risky"),
        (dataclasses.replace(BASE, bound=Bound.UNBOUNDED), "risky"),
        (dataclasses.replace(BASE, bound=Bound.UNKNOWN, worst_case_tokens=None, risk=None), "risky"),
    ],
    ids=["bounded-low", "bounded-medium", "bounded-high", "unbounded", "unknown"],
)
def test_tool_added(added: ToolLock, expected_class: str) -> None:
    ((change_class, kind, message),) = changes(None, added)
    assert (change_class, kind) == (expected_class, "tool-added")
    assert message.startswith("new tool: 200 definition tokens")


def test_risk_escalated_is_breaking_and_de_escalated_is_safe() -> None:
    high = dataclasses.replace(BASE, worst_case_tokens=6_000, risk=RiskTier.HIGH)
    assert changes(BASE, high) == [
        ("breaking", "risk-escalated", "risk escalated low → high (worst case 800 tokens → 6,000 tokens)")
    ]
    assert changes(high, BASE) == [
        ("safe", "risk-de-escalated", "risk de-escalated high → low (worst case 6,000 tokens → 800 tokens)")
    ]


def test_worst_case_change_within_a_tier_is_info() -> None:
    assert changes(BASE, dataclasses.replace(BASE, worst_case_tokens=900)) == [
        ("info", "worst-case-changed", "worst case 800 tokens → 900 tokens, still low")
    ]


def test_unbounded_risks_compare_at_the_same_assumptions() -> None:
    old = dataclasses.replace(BASE, bound=Bound.UNBOUNDED, worst_case_tokens=3_000, risk=RiskTier.MEDIUM)
    new = dataclasses.replace(old, worst_case_tokens=9_000, risk=RiskTier.CRITICAL)
    ((change_class, kind, _),) = changes(old, new)
    assert (change_class, kind) == ("breaking", "risk-escalated")


@pytest.mark.parametrize(
    ("old_bound", "new_bound", "expected"),
    [
        (Bound.BOUNDED, Bound.UNBOUNDED, ("risky", "became-unbounded")),
        (Bound.BOUNDED, Bound.UNKNOWN, ("risky", "lost-bound")),
        (Bound.UNKNOWN, Bound.UNBOUNDED, ("risky", "became-unbounded")),
        (Bound.UNBOUNDED, Bound.UNKNOWN, ("risky", "lost-bound")),
        (Bound.UNBOUNDED, Bound.BOUNDED, ("safe", "became-bounded")),
        (Bound.UNKNOWN, Bound.BOUNDED, ("safe", "became-bounded")),
    ],
)
def test_bound_changes(old_bound: Bound, new_bound: Bound, expected: tuple[str, str]) -> None:
    def with_bound(bound: Bound) -> ToolLock:
        if bound is Bound.UNKNOWN:
            return dataclasses.replace(BASE, bound=bound, worst_case_tokens=None, risk=None)
        return dataclasses.replace(BASE, bound=bound, worst_case_tokens=9_000, risk=RiskTier.CRITICAL)

    found = changes(with_bound(old_bound), with_bound(new_bound))
    assert expected in [(c, k) for c, k, _ in found]
    # No risk-tier comparison across a change of bound: the unbounded figure is at assumed sizes.
    assert not any(kind.startswith(("risk-esc", "risk-de")) for _, kind, _ in found)


def test_an_added_output_schema_that_reveals_a_high_worst_case_is_risky() -> None:
    unknown = dataclasses.replace(BASE, bound=Bound.UNKNOWN, worst_case_tokens=None, risk=None)
    critical = dataclasses.replace(BASE, worst_case_tokens=9_000, risk=RiskTier.CRITICAL)
    assert changes(unknown, critical) == [  # most severe first
        ("risky", "risk-known", "worst case now known: 9,000 tokens (critical)"),
        ("safe", "became-bounded", "outputSchema added, bounded (worst case unknown → 9,000 tokens)"),
    ]


@pytest.mark.parametrize(
    ("new_tokens", "expected"),
    [
        (221, ("info", "tax-changed")),  # +10.5% but only 21 tokens
        (220, ("info", "tax-changed")),  # exactly the threshold is not over it
        (226, ("risky", "tax-growth")),  # +13% and 26 tokens
        (170, ("safe", "tax-shrink")),
        (195, ("info", "tax-changed")),
    ],
)
def test_definition_tax_growth_over_the_threshold_is_risky(
    new_tokens: int, expected: tuple[str, str]
) -> None:
    found = changes(BASE, dataclasses.replace(BASE, definition_tokens=new_tokens, digest="sha256:b"))
    assert [(c, k) for c, k, _ in found] == [expected]
    assert found[0][2].startswith(f"definition tax 200 → {new_tokens} tokens")


def test_server_total_tax_growth() -> None:
    old = lock("old.json", a=BASE)
    new = lock("new.json", a=BASE, b=dataclasses.replace(BASE, definition_tokens=100))
    result = compare(old, new)
    server = [c for c in result.changes if c.tool is None]
    assert [(c.change_class, c.kind, c.message) for c in server] == [
        (ChangeClass.RISKY, "server-tax-growth", "definition tax of the server 200 → 300 tokens (+50.0%)")
    ]


def test_reworded_definition_with_the_same_cost_is_info() -> None:
    assert changes(BASE, dataclasses.replace(BASE, digest="sha256:b")) == [
        ("info", "definition-changed", "definition changed, same token cost")
    ]


def test_no_change_exits_zero() -> None:
    result = compare(lock("a", t=BASE), lock("b", t=BASE))
    assert (result.changes, result.worst, result.exit_code) == ((), None, ExitCode.OK)


def test_exit_code_follows_the_worst_class() -> None:
    safe = compare(lock("a", t=BASE), lock("b", t=BASE, u=BASE))  # +100% tax: risky
    assert safe.exit_code is ExitCode.DIFF_RISKY
    breaking = compare(lock("a", t=BASE, u=BASE), lock("b", t=BASE))
    assert breaking.worst is ChangeClass.BREAKING and breaking.exit_code is ExitCode.DIFF_BREAKING
    only_safe = compare(
        lock("a", t=BASE, u=BASE), lock("b", t=BASE, u=dataclasses.replace(BASE, definition_tokens=195))
    )
    assert only_safe.worst is ChangeClass.INFO and only_safe.exit_code is ExitCode.OK
    changes_first = [c.change_class.rank for c in breaking.changes]
    assert changes_first == sorted(changes_first, reverse=True)


@pytest.mark.parametrize(
    "other",
    [
        Settings(encoding="cl100k_base"),
        Settings(risk=RiskThresholds(500, 4000, 8000)),
        Settings(assumptions=Assumptions(unbounded_items=50)),
    ],
    ids=["encoding", "thresholds", "assumptions"],
)
def test_locks_with_different_settings_are_incompatible(other: Settings) -> None:
    with pytest.raises(CliError) as raised:
        compare(lock("old.json", t=BASE), lock("new.json", other, t=BASE))
    assert raised.value.code is ExitCode.LOCK_INCOMPATIBLE
    assert raised.value.message.startswith("old.json and new.json were made with different settings")
