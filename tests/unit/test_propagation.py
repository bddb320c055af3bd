# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The budget scope and its context window in `_meta` baggage: what a server accepts from a peer."""

from __future__ import annotations

import pytest
from opentelemetry import context
from opentelemetry.instrumentation.mcp_tokens import budget_scope
from opentelemetry.instrumentation.mcp_tokens.patches.propagation import (
    budget_scope_of,
    explicit_budget_scope,
    inject_meta,
)
from opentelemetry.instrumentation.mcp_tokens.scope import BudgetRef


def test_a_scope_and_its_window_round_trip_through_meta() -> None:
    with budget_scope("conversation-42", context_window=128_000) as ref:
        meta = inject_meta({"progressToken": 7}, context.get_current(), ref)
        assert explicit_budget_scope() == BudgetRef("conversation-42", 128_000)
    assert meta["progressToken"] == 7
    assert budget_scope_of(meta) == BudgetRef("conversation-42", 128_000)


def test_a_scope_without_a_window_leaves_the_server_its_default() -> None:
    with budget_scope("conversation-7") as ref:
        meta = inject_meta(None, context.get_current(), ref)
    assert budget_scope_of(meta) == BudgetRef("conversation-7", None)


@pytest.mark.parametrize(
    "window",
    ["0", "-5", "12.5", "1e6", "99999999999", "", "٣٤٥", " 128000x"],
)
def test_a_hostile_window_is_ignored_and_the_scope_kept(window: str) -> None:
    meta = {"baggage": f"mcp_tokens.budget.scope=c1,mcp_tokens.budget.context_window={window}"}
    assert budget_scope_of(meta) == BudgetRef("c1", None)


@pytest.mark.parametrize(
    "meta",
    [None, {}, {"baggage": 5}, {"baggage": "other=1"}, {"baggage": "mcp_tokens.budget.scope=" + "x" * 300}],
)
def test_no_usable_scope_is_none(meta: object) -> None:
    assert budget_scope_of(meta) is None  # type: ignore[arg-type]
