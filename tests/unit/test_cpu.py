"""The analysis' share of CPU under sustained load (cpu.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens import cpu


@pytest.mark.parametrize(
    ("spare", "cpus", "share"),
    [
        (None, 8, cpu.HELPER_SHARE),
        (0.5, 8, 0.0),
        (2.0, 8, 0.0),
        (2.3, 8, 0.3),
        (6.0, 8, cpu.HELPER_MAX_SHARE),
        # Two cores: one kept free. A client and a server calling back to back leave less
        # than one idle; a single slow call in flight leaves nearly two.
        (0.8, 2, 0.0),
        (1.2, 2, 0.2),
        (1.9, 2, cpu.HELPER_MAX_SHARE),
        (0.4, 1, 0.0),
        (0.9, 1, 0.4),
    ],
)
def test_the_helper_takes_idle_cpu_beyond_what_is_kept_free(
    spare: float | None, cpus: int, share: float
) -> None:
    assert cpu.helper_share(spare, cpus) == pytest.approx(share)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc/stat")
def test_idle_cores_are_read_from_proc_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    now = [100.0]
    monkeypatch.setattr(cpu.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 4)
    spare = cpu.SpareCpu(str(stat))
    assert spare.cpus == 4
    stat.write_text("cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n")
    assert spare.cores() == pytest.approx(4 * 800 / 1000)  # the first reading: since boot
    # Over the next second: 100 busy, 300 idle + iowait + nice jiffies of 400.
    stat.write_text("cpu  150 50 150 1000 50 0 0 0 0 0\n")
    now[0] += 0.5
    assert spare.cores() == pytest.approx(3.2)  # read at most once a second
    now[0] += 0.6
    assert spare.cores() == pytest.approx(4 * 300 / 400)
    stat.write_text("garbage\n")
    now[0] += 1.1
    assert spare.cores() is None
    assert cpu.SpareCpu(str(tmp_path / "missing")).cores() is None


def test_the_real_proc_stat_gives_a_plausible_reading() -> None:
    cores = cpu.SpareCpu().cores()
    if not os.path.exists("/proc/stat"):
        assert cores is None
        return
    assert cores is not None and 0 <= cores <= (os.cpu_count() or 1)


def test_the_cpu_share_refills_at_its_rate_up_to_what_it_banks(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(cpu.time, "monotonic", lambda: now[0])
    share = cpu.CpuShare(0.1, bank_s=0.5)  # banks 0.05 s at most, and starts with it
    assert share.take(0.04) and share.take(0.04)  # into debt once
    assert not share.take(0.001)
    now[0] += 0.2  # refills 0.02 s: still 0.01 s in debt
    assert not share.take(0.001)
    now[0] += 0.2
    assert share.take(0.001)
    now[0] += 100
    assert share.take(0.05) and not share.take(0.001)  # no more than it banks


def test_a_share_of_none_banks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(cpu.time, "monotonic", lambda: now[0])
    share = cpu.CpuShare(0.1, bank_s=1.0)
    share.share = 0.0  # the machine has no idle core to give
    assert not share.take(0.001)
    now[0] += 100
    assert not share.take(0.001)
    share.share = 0.2
    now[0] += 1
    assert share.take(0.1) and share.take(0.1) and not share.take(0.001)


def test_the_helper_cost_follows_what_the_helper_reports() -> None:
    cost = cpu.HelperCost()
    before = cost.of(10_000)
    for _ in range(100):
        cost.observe(0.011, 10_000)  # 1 microsecond a character
    assert cost.of(10_000) == pytest.approx(0.011, rel=0.01)
    assert cost.of(10_000) > before
    cost.observe(0.0, 10_000)  # no report: no change
    assert cost.of(10_000) == pytest.approx(0.011, rel=0.01)
