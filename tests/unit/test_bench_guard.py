# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard benchmark's verdicts: a size's ratio is over its bound only when two blocks of
the guard off (A/A) differ by less than the bound on this machine."""

from __future__ import annotations

import random

from tests.bench.guard import ORDERS, OffAndOn


def blocks_of(on_cost: float, block_noise: float, rounds: int = 16, seed: int = 3) -> OffAndOn:
    """Rounds of three 40-call blocks; each block runs at a speed off by up to `block_noise`
    (the machine's drift), the guard's blocks `on_cost` slower."""
    generator = random.Random(seed)
    measured = OffAndOn([], [], [])
    for _ in range(rounds):
        for blocks, cost in ((measured.off, 1.0), (measured.again, 1.0), (measured.on, on_cost)):
            speed = 1.0 + generator.uniform(-block_noise, block_noise)
            blocks.append([0.002 * cost * speed * generator.uniform(0.98, 1.02) for _ in range(40)])
    return measured


def test_a_small_cost_is_ok() -> None:
    assert blocks_of(on_cost=1.03, block_noise=0.01).verdict(1.10) == "ok"


def test_a_large_cost_on_a_quiet_machine_is_over() -> None:
    measured = blocks_of(on_cost=1.25, block_noise=0.01)
    assert measured.ratio > 1.2
    assert measured.verdict(1.10) == "over"


def test_the_same_cost_where_two_blocks_of_one_mode_differ_more_is_unresolved() -> None:
    measured = blocks_of(on_cost=1.25, block_noise=0.4, rounds=8)
    _, low, high = measured.noise()
    assert low < 1 / 1.10 or high > 1.10
    assert measured.verdict(1.10) == "unresolved"


def test_the_rounds_take_every_order_of_the_three_blocks() -> None:
    assert len(set(ORDERS)) == 6 and all(sorted(order) == ["again", "off", "truncate"] for order in ORDERS)
