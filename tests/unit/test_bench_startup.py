# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The start-up benchmark's verdicts: a row is over its bound only when the machine's own
noise (two runs of the same process, A/A) lies within it."""

from __future__ import annotations

import random

from tests.bench.startup import ORDERS, Row


def row_of(added_ms: float, noise_ms: float, rounds: int = 30, seed: int = 7) -> Row:
    """Rounds whose U and I differ by `added_ms`, each run off by up to `noise_ms`."""
    generator = random.Random(seed)
    row = Row("a process", ["python"], ["python"])
    for _ in range(rounds):
        base = 1.0 + generator.uniform(-0.2, 0.2)  # the machine's speed this round, s
        for variant, added in (("U", 0.0), ("A", 0.0), ("I", added_ms / 1000)):
            cpu = base + added + generator.uniform(-noise_ms, noise_ms) / 1000
            row.runs[variant].append((cpu, cpu))
    return row


def test_a_cost_well_under_the_bound_is_ok() -> None:
    assert row_of(added_ms=10, noise_ms=5).verdict(50) == "ok"


def test_a_cost_well_over_the_bound_on_a_quiet_machine_is_over() -> None:
    row = row_of(added_ms=120, noise_ms=5)
    assert row.verdict(50) == "over 50"
    assert row.added_cpu_ms()[1] > 100


def test_the_same_cost_on_a_machine_noisier_than_the_bound_is_unresolved() -> None:
    row = row_of(added_ms=120, noise_ms=400, rounds=12)
    _, noise_low, noise_high = row.added_cpu_ms("A")
    assert noise_low < -50 or noise_high > 50
    assert row.verdict(50) == "unresolved"


def test_the_rounds_take_every_order_equally_often() -> None:
    assert sorted("".join(order) for order in ORDERS) == ["AIU", "AUI", "IAU", "IUA", "UAI", "UIA"]
