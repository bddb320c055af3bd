# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The budget ledger: levels, crossings, definitions counted once, bounds and threads."""

from __future__ import annotations

import gc
import itertools
import math
import sys
import threading
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import (
    _PURGE_BATCH,
    MAX_SCOPE_KEY_CHARS,
    MAX_SERVER_KEY_CHARS,
    MAX_SERVERS_PER_SCOPE,
    MAX_TOKENS,
    BudgetLedger,
    BudgetLevel,
    BudgetSnapshot,
    BudgetThresholds,
    clamp_tokens,
    scope_key,
    server_key,
)

OK, WARNING, CRITICAL = BudgetLevel.OK, BudgetLevel.WARNING, BudgetLevel.CRITICAL


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


# -- thresholds and levels ----------------------------------------------------------------


def test_levels_are_ranked_in_order() -> None:
    assert [level.rank for level in (OK, WARNING, CRITICAL)] == [0, 1, 2]
    assert [level.value for level in BudgetLevel] == ["ok", "warning", "critical"]


def test_default_thresholds_are_the_seed_values() -> None:
    assert BudgetThresholds() == BudgetThresholds(0.75, 0.90)
    assert BudgetThresholds.parse("0.75,0.90") == BudgetThresholds()
    assert BudgetThresholds.parse(" 0.5 , 1 ") == BudgetThresholds(0.5, 1.0)


@pytest.mark.parametrize(
    ("utilization", "level"),
    [(0.0, OK), (0.7499, OK), (0.75, WARNING), (0.8999, WARNING), (0.90, CRITICAL), (1.7, CRITICAL)],
)
def test_a_level_starts_at_its_threshold(utilization: float, level: BudgetLevel) -> None:
    assert BudgetThresholds().level(utilization) is level


def test_nan_utilization_reads_as_ok_instead_of_raising() -> None:
    assert BudgetThresholds().level(math.nan) is OK


@pytest.mark.parametrize(
    "text", ["0.9,0.75", "0.75,0.75", "75,90", "0,0.5", "0.5,1.01", "nan,0.9", "0.5,inf", "0.75", "a,b", ""]
)
def test_bad_thresholds_are_rejected_naming_the_input(text: str) -> None:
    with pytest.raises(ValueError, match=r"thresholds|fractions") as raised:
        BudgetThresholds.parse(text)
    assert repr(text) in str(raised.value)


def test_constructing_bad_thresholds_names_the_values() -> None:
    with pytest.raises(ValueError, match=r"warning=0\.9, critical=0\.8"):
        BudgetThresholds(0.9, 0.8)


# -- accounting -----------------------------------------------------------------------------


def test_responses_and_arguments_accumulate_against_the_default_window() -> None:
    ledger = BudgetLedger()
    ledger.add("s", 30_000)
    snapshot = ledger.add("s", 20_000)
    assert snapshot == BudgetSnapshot("s", 200_000, 50_000, 0.25, OK, None)
    assert ledger.get("s") == snapshot


def test_utilization_uses_each_scopes_own_window() -> None:
    ledger = BudgetLedger(context_window=1000)
    ledger.open("small", context_window=100)
    ledger.add("small", 80)
    ledger.add("default", 80)
    small, default = ledger.get("small"), ledger.get("default")
    assert small is not None
    assert default is not None
    assert (small.context_window, small.utilization, small.level) == (100, 0.8, WARNING)
    assert (default.context_window, default.utilization, default.level) == (1000, 0.08, OK)


def test_a_given_window_overrides_the_scopes_window_from_then_on() -> None:
    ledger = BudgetLedger(context_window=1000)
    ledger.add("s", 500)
    assert ledger.add("s", 0, context_window=2000).utilization == 0.25
    assert ledger.add("s", 0).context_window == 2000
    assert ledger.open("s", context_window=500).utilization == 1.0


@pytest.mark.parametrize("window", [0, -5, math.nan, "128000"])
def test_an_unusable_window_override_is_ignored(window: object) -> None:
    ledger = BudgetLedger(context_window=1000)
    ledger.add("s", 100)
    snapshot = ledger.add("s", 0, context_window=window)  # type: ignore[arg-type]
    assert (snapshot.context_window, snapshot.utilization) == (1000, 0.1)


def test_utilization_can_exceed_one_when_over_budget() -> None:
    ledger = BudgetLedger(context_window=1000)
    snapshot = ledger.add("s", 2500)
    assert (snapshot.used, snapshot.utilization, snapshot.level) == (2500, 2.5, CRITICAL)


@pytest.mark.parametrize(
    ("tokens", "counted"),
    [(-500, 0), (12.9, 12), (-3.5, 0), (math.nan, 0), (math.inf, MAX_TOKENS), (10**40, MAX_TOKENS), ("7", 0)],
)
def test_token_values_are_clamped(tokens: object, counted: int) -> None:
    assert clamp_tokens(tokens) == counted
    ledger = BudgetLedger()
    ledger.add("s", 10)
    assert ledger.add("s", tokens).used == min(10 + counted, MAX_TOKENS)  # type: ignore[arg-type]


def test_used_saturates_instead_of_growing_without_bound() -> None:
    ledger = BudgetLedger()
    for _ in range(3):
        snapshot = ledger.add("s", 10**40)
        ledger.set_definitions("s", "srv", 10**40)
    assert ledger.add("s", 1).used == MAX_TOKENS
    assert snapshot.level is CRITICAL


# -- tool definitions count once per server -------------------------------------------------


def test_relisting_a_server_replaces_its_definitions() -> None:
    ledger = BudgetLedger(context_window=10_000)
    ledger.add("s", 100)
    ledger.set_definitions("s", "github", 3000)
    assert ledger.set_definitions("s", "github", 3000).used == 3100
    assert ledger.set_definitions("s", "github", 1200).used == 1300


def test_definitions_of_different_servers_add_up() -> None:
    ledger = BudgetLedger(context_window=10_000)
    ledger.set_definitions("s", "github", 3000)
    assert ledger.set_definitions("s", "filesystem", 500).used == 3500
    assert ledger.set_definitions("other", "github", 700).used == 700


def test_server_names_are_truncated_so_long_variants_are_one_server() -> None:
    ledger = BudgetLedger(context_window=10_000)
    stem = "x" * MAX_SERVER_KEY_CHARS
    ledger.set_definitions("s", stem + "-one", 1000)
    assert ledger.set_definitions("s", stem + "-two", 400).used == 400


def test_past_the_server_cap_the_oldest_listing_is_forgotten_but_stays_counted() -> None:
    ledger = BudgetLedger(context_window=10**6)
    for index in range(MAX_SERVERS_PER_SCOPE):
        ledger.set_definitions("s", f"server-{index}", 10)
    assert ledger.set_definitions("s", "one-too-many", 10).used == 10 * (MAX_SERVERS_PER_SCOPE + 1)
    # server-0 was forgotten: listing it again counts again (errs high, by design) ...
    assert ledger.set_definitions("s", "server-0", 10).used == 10 * (MAX_SERVERS_PER_SCOPE + 2)
    # ... while a server still remembered is replaced, not added.
    assert ledger.set_definitions("s", "one-too-many", 10).used == 10 * (MAX_SERVERS_PER_SCOPE + 2)


# -- crossings --------------------------------------------------------------------------------


def test_each_level_is_reported_once_on_the_way_up() -> None:
    ledger = BudgetLedger(context_window=1000)
    crossings = [ledger.add("s", tokens).crossed for tokens in (700, 60, 40, 100, 50, 500)]
    assert crossings == [None, WARNING, None, CRITICAL, None, None]


def test_jumping_from_ok_to_critical_reports_critical_only() -> None:
    ledger = BudgetLedger(context_window=1000)
    assert ledger.add("s", 950).crossed is CRITICAL
    # Widening the window drops the level to warning, which is not reported afterwards.
    widened = ledger.add("s", 0, context_window=1200)
    assert (widened.level, widened.crossed) == (WARNING, None)
    assert ledger.add("s", 100).crossed is None


def test_definitions_and_window_changes_can_cross_too() -> None:
    ledger = BudgetLedger(context_window=1000)
    assert ledger.set_definitions("s", "srv", 800).crossed is WARNING
    assert ledger.open("s", context_window=850).crossed is CRITICAL


def test_reads_and_closes_never_report_a_crossing() -> None:
    ledger = BudgetLedger(context_window=1000)
    ledger.add("s", 950)
    got, closed = ledger.get("s"), ledger.close("s")
    assert got is not None
    assert closed is not None
    assert (got.crossed, closed.crossed, closed.level) == (None, None, CRITICAL)


def test_a_closed_scope_starts_over_and_reports_again() -> None:
    ledger = BudgetLedger(context_window=1000)
    ledger.add("s", 800)
    closed = ledger.close("s")
    assert closed is not None
    assert closed.used == 800
    assert ledger.close("s") is None
    assert ledger.get("s") is None
    assert ledger.add("s", 760).crossed is WARNING
    assert ledger.evictions == 0


def test_an_evicted_scope_starts_over_and_reports_again() -> None:
    ledger = BudgetLedger(context_window=1000, max_scopes=1)
    assert ledger.add("a", 800).crossed is WARNING
    ledger.open("b")
    assert ledger.add("a", 800).crossed is WARNING
    assert ledger.evictions == 2


# -- bounds: LRU and idle TTL ----------------------------------------------------------------


def test_the_least_recently_used_scope_is_dropped_when_full() -> None:
    ledger = BudgetLedger(max_scopes=3)
    for scope in ("a", "b", "c"):
        ledger.open(scope)
    ledger.add("a", 1)
    ledger.open("d")
    assert len(ledger) == 3
    assert ledger.evictions == 1
    assert ledger.get("b") is None
    assert all(ledger.get(scope) is not None for scope in ("a", "c", "d"))


def test_get_does_not_refresh_a_scope() -> None:
    ledger = BudgetLedger(max_scopes=2)
    ledger.open("a")
    ledger.open("b")
    ledger.get("a")
    ledger.open("c")
    assert ledger.get("a") is None
    assert ledger.get("b") is not None


def test_idle_scopes_expire_after_the_ttl() -> None:
    clock = FakeClock()
    ledger = BudgetLedger(idle_ttl=10.0, clock=clock)
    ledger.add("a", 5)
    clock.now = 5.0
    ledger.add("b", 5)
    clock.now = 9.0
    ledger.add("a", 5)  # activity restarts a's idle time
    clock.now = 15.5
    assert ledger.get("b") is None
    assert ledger.get("a") is not None
    assert len(ledger) == 1
    clock.now = 19.0
    assert len(ledger) == 1  # exactly the TTL idle is still alive
    clock.now = 19.5
    assert len(ledger) == 0
    assert ledger.evictions == 2
    assert ledger.add("a", 5).used == 5  # a fresh scope, not the old total


def test_expired_scopes_are_purged_a_bounded_batch_per_call() -> None:
    clock = FakeClock()
    ledger = BudgetLedger(idle_ttl=1.0, clock=clock)
    count = 3 * _PURGE_BATCH
    for index in range(count):
        ledger.open(f"old-{index}")
    clock.now = 2.0
    ledger.open("new")
    assert ledger.evictions == _PURGE_BATCH  # one call did bounded work
    assert ledger.get(f"old-{count - 1}") is None  # still held, but expired is expired
    for _ in range(3):
        ledger.open("new")
    assert ledger.evictions == count
    assert len(ledger) == 1


def test_an_infinite_ttl_never_expires() -> None:
    clock = FakeClock()
    ledger = BudgetLedger(idle_ttl=math.inf, clock=clock)
    ledger.open("a")
    clock.now = 1e12
    assert ledger.get("a") is not None


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"context_window": 0}, "context_window"),
        ({"max_scopes": 0}, "max_scopes"),
        ({"idle_ttl": 0.0}, "idle_ttl"),
        ({"idle_ttl": math.nan}, "idle_ttl"),
    ],
)
def test_bad_settings_are_rejected_naming_them(settings: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BudgetLedger(**settings)  # type: ignore[arg-type]


# -- hostile scope keys -------------------------------------------------------------------------


def test_short_keys_are_kept_and_long_keys_get_a_stable_distinct_short_form() -> None:
    short = "s" * MAX_SCOPE_KEY_CHARS
    assert scope_key(short) is short
    first, second = "k" * 10_000 + "1", "k" * 10_000 + "2"
    assert len(scope_key(first)) == MAX_SCOPE_KEY_CHARS
    assert scope_key(first) == scope_key("k" * 10_000 + "1")
    assert scope_key(first) != scope_key(second)
    assert scope_key(first).startswith("k" * 200)
    assert "~sha256:" in scope_key(first)


def test_long_keys_are_separate_scopes_in_the_ledger() -> None:
    ledger = BudgetLedger()
    first, second = "k" * 5000 + "1", "k" * 5000 + "2"
    ledger.add(first, 10)
    snapshot = ledger.add(second, 20)
    assert snapshot.used == 20
    assert snapshot.scope == scope_key(second)
    assert ledger.add(first, 1).used == 11


@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=600), st.integers())
def test_any_string_and_any_integer_are_accepted(scope: str, tokens: int) -> None:
    ledger = BudgetLedger(max_scopes=4)
    snapshot = ledger.add(scope, tokens)
    ledger.set_definitions(scope, scope, tokens)
    assert len(snapshot.scope) <= MAX_SCOPE_KEY_CHARS
    assert 0 <= snapshot.used <= MAX_TOKENS
    assert ledger.close(scope) is not None


def test_lone_surrogates_and_control_characters_in_long_keys_hash_fine() -> None:
    key = "\ud800\x00\udfff" * 200
    assert len(scope_key(key)) == MAX_SCOPE_KEY_CHARS
    assert scope_key(key) != scope_key(key[:-1])


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_values_that_are_not_strings_still_key_a_scope() -> None:
    assert scope_key(None) == "None"
    assert scope_key(_Unprintable()) == ""
    assert server_key(12345) == "12345"
    ledger = BudgetLedger(context_window=1000)
    ledger.set_definitions(None, _Unprintable(), 10)  # type: ignore[arg-type]
    assert ledger.set_definitions(None, "", 20).used == 20  # type: ignore[arg-type]


def test_foreign_token_values_are_converted_outside_the_lock() -> None:
    ledger = BudgetLedger()

    class ReadsTheLedger:
        def __index__(self) -> int:
            ledger.get("s")  # would deadlock if conversion ran under the ledger's lock
            return 5

    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(ledger.add("s", ReadsTheLedger()).used))  # type: ignore[arg-type]
    worker.start()
    worker.join(timeout=5)
    assert not worker.is_alive()
    assert result == [5]


def test_snapshots_are_immutable() -> None:
    snapshot = BudgetLedger().open("s")
    with pytest.raises(AttributeError):
        snapshot.used = 1  # type: ignore[misc]


# -- threads ---------------------------------------------------------------------------------------


def test_concurrent_updates_are_exact_and_each_crossing_is_reported_once() -> None:
    threads_count, adds_per_thread = 4, 5000
    # Below max_scopes: the churning thread must not evict the shared scope.
    ledger = BudgetLedger(context_window=threads_count * adds_per_thread, max_scopes=50)
    crossings: list[BudgetLevel] = []
    errors: list[BaseException] = []
    start = threading.Barrier(threads_count + 1)

    def hammer_shared_scope() -> None:
        start.wait()
        for _ in range(adds_per_thread):
            crossed = ledger.add("shared", 1).crossed
            if crossed is not None:
                crossings.append(crossed)

    def churn_other_scopes() -> None:
        start.wait()
        try:
            for index in range(adds_per_thread):
                ledger.set_definitions(f"churn-{index % 40}", f"srv-{index % 3}", 1)
                ledger.get("shared")
        except BaseException as error:  # surfaced below: an exception in a thread is silent
            errors.append(error)

    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the threads far more often than every 5 ms
    try:
        workers = [threading.Thread(target=hammer_shared_scope) for _ in range(threads_count - 1)]
        workers.append(threading.Thread(target=churn_other_scopes))
        for worker in workers:
            worker.start()
        start.wait()
        for _ in range(adds_per_thread):
            crossed = ledger.add("shared", 1).crossed
            if crossed is not None:
                crossings.append(crossed)
        for worker in workers:
            worker.join()
    finally:
        sys.setswitchinterval(switch_interval)

    assert errors == []
    final = ledger.get("shared")
    assert final is not None
    assert final.used == threads_count * adds_per_thread
    assert sorted(crossings, key=lambda level: level.rank) == [WARNING, CRITICAL]
    assert len(ledger) <= 50


# -- memory -------------------------------------------------------------------------------------

_KEY_HEADS = [f"{index:04d}" for index in range(1000)]
_KEY_TAILS = [f"{index:03d}" for index in range(1000)]
SCOPE_BYTES_BOUND = 400
"""Bytes per held scope with short keys. Measured with 7-character keys: 226 when first
full, 260 once churn has grown the LRU table, 302 at the peak of a table resize."""


@pytest.mark.slow
def test_a_million_distinct_scopes_never_grow_memory_past_the_bound() -> None:
    total_keys, max_scopes = 1_000_000, 10_000
    # With the cycle collector off, a reference cycle left per call would show as growth
    # below; it also keeps the run fast (no full collections of the test process's heap).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        ledger = BudgetLedger()
        add = ledger.add
        # 1000 x 1000 fixed-width keys: equal sizes keep "does not grow" sharp, and joining
        # two prepared halves allocates only the key itself (tracing makes allocation dear).
        keys = (head + tail for head in _KEY_HEADS for tail in _KEY_TAILS)
        for key in itertools.islice(keys, max_scopes):
            add(key, 100)
        full = tracemalloc.get_traced_memory()[0] - baseline
        tracemalloc.reset_peak()
        samples = []
        for _ in range(total_keys // max_scopes - 1):
            for key in itertools.islice(keys, max_scopes):
                add(key, 100)
            samples.append(tracemalloc.get_traced_memory()[0] - baseline)
        peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
        if gc_was_enabled:
            gc.enable()

    assert next(keys, None) is None  # every key went through
    assert len(ledger) == max_scopes
    assert ledger.evictions == total_keys - max_scopes
    assert full <= max_scopes * SCOPE_BYTES_BOUND
    assert peak <= max_scopes * SCOPE_BYTES_BOUND
    # Not growing: the last 90 rounds hold what the 10th held, give or take allocator noise.
    assert max(samples[9:]) - samples[9] <= 16 * 1024
    print(f"1M scopes: full={full} B, peak={peak} B, last={samples[-1]} B")


def test_one_scope_stays_small_whatever_server_names_it_is_sent() -> None:
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        ledger = BudgetLedger()
        for index in range(5000):
            # Non-ASCII names cost four bytes per character: the worst case per name.
            ledger.set_definitions("s", f"{index:05d}" + "\U0001f600" * 10_000, 10)
        held = tracemalloc.get_traced_memory()[0] - baseline
    finally:
        tracemalloc.stop()
    snapshot = ledger.get("s")
    assert snapshot is not None
    assert snapshot.used == 5000 * 10
    assert held <= 64 * 1024, held  # measured 41.7 KB: 64 names of 128 four-byte characters
