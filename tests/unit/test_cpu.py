# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Whether the helper may work beside the application's calls (cpu.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from opentelemetry.instrumentation.mcp_tokens import cpu
from opentelemetry.instrumentation.mcp_tokens.pacing import Pacing


def reading(tmp_path: Path, cpus: int, idle_cores: float) -> cpu.SpareCpu:
    """A machine of `cpus` cores with `idle_cores` idle over the last interval."""
    stat = tmp_path / "stat"
    stat.write_text("cpu  0 0 0 0 0 0 0 0 0 0\n")
    spare = cpu.SpareCpu(Pacing(spare_every_s=0.0), str(stat))
    spare.cpus = cpus
    spare.cores()
    idle = round(1000 * idle_cores / cpus)
    stat.write_text(f"cpu  {1000 - idle} 0 0 {idle} 0 0 0 0 0 0\n")
    return spare


@pytest.mark.parametrize(
    ("cpus", "idle", "alongside"),
    [
        (8, 0.5, False),
        (8, 1.9, False),
        (8, 2.3, True),  # beyond the two cores kept free
        # Two cores: one kept free. A client and a server calling back to back leave less
        # than one idle; a single slow call in flight leaves nearly two.
        (2, 0.8, False),
        (2, 1.2, True),
        (1, 0.4, False),
        (1, 0.9, True),
    ],
)
def test_the_helper_works_beside_calls_only_on_idle_cpu_beyond_what_is_kept_free(
    tmp_path: Path, cpus: int, idle: float, alongside: bool
) -> None:
    assert reading(tmp_path, cpus, idle).for_helper() is alongside


def test_where_idle_cpu_cannot_be_read_the_helper_may_work_beside_calls(tmp_path: Path) -> None:
    assert cpu.SpareCpu(path=str(tmp_path / "missing")).for_helper()


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc/stat")
def test_idle_cores_are_read_from_proc_stat(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stat = tmp_path / "stat"
    now = [100.0]
    monkeypatch.setattr(cpu.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(cpu.os, "cpu_count", lambda: 4)
    spare = cpu.SpareCpu(path=str(stat))
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
    assert cpu.SpareCpu(path=str(tmp_path / "missing")).cores() is None


def test_the_real_proc_stat_gives_a_plausible_reading() -> None:
    cores = cpu.SpareCpu().cores()
    if not os.path.exists("/proc/stat"):
        assert cores is None
        return
    assert cores is not None and 0 <= cores <= (os.cpu_count() or 1)
