# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What a tool call costs, in instructions: `python -m tests.bench.instructions`.

Wall-clock and CPU-time ratios on a shared two-core machine swing by 5-10% between runs,
more than most changes to the analysis are worth. Instructions retired do not: this counts
them with valgrind's cachegrind (user space, every thread of the process; the counting
service is another process and is not counted) for the saturation benchmark's tool
(`records`: 2-12 KB of JSON text plus the same rows as structuredContent), called over the
full streamable-HTTP request path of a stateless server, one call after the other
(tests/bench/_instructions_child.py). Each variant runs twice, with `--calls` (100) more
calls the second time; the difference over those calls is the cost of one, start-up and
warm-up excluded. The analysis of every call is recorded before a run ends, so its work is
in the count.

Variants: `plain` (OpenTelemetry's SDK, no mcp-tokens), `patches` (mcp-tokens' patches and
spans, nothing analysed), `instrumented`, and two that take one part of the analysis away
to show what it costs: `no-metrics` (no metric recorded) and `no-wire` (nothing sent to the
counting service, nothing recorded). Last, the price of one histogram measurement in the
OpenTelemetry SDK (the child's `histogram` mode), times the measurements an instrumented
call makes: with the patches, the least any design that records the contract's histograms
adds, and so the most throughput it can keep.

Instructions are user space only. What the kernel does for a call is measured apart, in
the same child run without valgrind (`--kernel-runs` times each of plain, patches and
instrumented, in turn): voluntary context switches per call (and of them, the analysis
thread's), and user and system CPU time per call, medians over the runs. A switch is a
thread that blocked: on a socket, a sleep, or the GIL, which the analysis thread and the
application's thread hand to each other.
Informational: no bound (the saturation benchmark's throughput floor is the bound this
explains). Where valgrind is not installed, the instruction counts are skipped, with a
message, and the kernel's table is still measured.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from typing import NamedTuple

from examples.processes import REPO_ROOT

from ._doc import add_markdown_option, publish, table
from .footprint import own_counting_service
from .saturation import FLOORS

VARIANTS = ("plain", "patches", "instrumented", "no-metrics", "no-wire")
BASE_CALLS = 10
_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")
_MEASUREMENTS = re.compile(r"histogram measurements: (\d+)")
_KERNEL = re.compile(
    r"per call: switches ([\d.]+) user ([\d.]+) system ([\d.]+)(?: analysis thread ([\d.]+))?"
)
KERNEL_VARIANTS = ("plain", "patches", "instrumented")
KERNEL_CALLS = 1000
# A histogram measurement's price: the difference over this many of them.
PRICED_MEASUREMENTS = 10_000
SATURATION_FLOOR = FLOORS["throughput"]


def instructions(output: str) -> int:
    """The instruction count in cachegrind's summary ("I refs: 1,234")."""
    found = _REFS.search(output)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{output[-2000:]}")
    return int(found.group(1).replace(",", ""))


class Count(NamedTuple):
    instructions: float
    measurements: float  # histogram measurements the process's MeterProvider took


def run(valgrind: str, variant: str, calls: int) -> Count:
    command = [
        valgrind,
        "--tool=cachegrind",
        "--cache-sim=no",
        "--cachegrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "tests.bench._instructions_child",
        variant,
        str(calls),
    ]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} ({calls} calls) failed:\n{done.stderr[-2000:]}")
    return Count(instructions(done.stderr), measurements(done.stderr))


def measurements(output: str) -> int:
    """The histogram measurements the child reported ("histogram measurements: 120")."""
    found = _MEASUREMENTS.search(output)
    if found is None:
        raise RuntimeError(f"no measurement count in the child's output:\n{output[-2000:]}")
    return int(found.group(1))


class Kernel(NamedTuple):
    switches: float  # voluntary context switches per call
    user_ms: float  # CPU time per call, in user space
    system_ms: float  # and in the kernel
    thread_switches: float | None = None  # of the switches, the analysis thread's (None: unknown)


def kernel_of(output: str) -> Kernel:
    """The child's per-call line ("per call: switches 2.0 user 2.5 system 0.1", then
    " analysis thread 1.5" where it has one and the kernel names it)."""
    found = _KERNEL.search(output)
    if found is None:
        raise RuntimeError(f"no per-call line in the child's output:\n{output[-2000:]}")
    switches, user, system, thread = found.groups()
    return Kernel(float(switches), float(user), float(system), None if thread is None else float(thread))


def run_plainly(variant: str, calls: int) -> Kernel:
    """One child run without valgrind: what its calls cost the kernel."""
    command = [sys.executable, "-m", "tests.bench._instructions_child", variant, str(calls)]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} ({calls} calls) failed:\n{done.stderr[-2000:]}")
    return kernel_of(done.stderr)


def kernel_costs(runs: int, calls: int = KERNEL_CALLS) -> dict[str, Kernel]:
    """Each variant's medians over `runs` runs, taking turns (each turn's order the last
    one's reversed), so that all see the same machine."""
    seen: dict[str, list[Kernel]] = {variant: [] for variant in KERNEL_VARIANTS}
    for turn in range(runs):
        for variant in KERNEL_VARIANTS if turn % 2 == 0 else KERNEL_VARIANTS[::-1]:
            seen[variant].append(run_plainly(variant, calls))
    return {variant: _medians(kernels) for variant, kernels in seen.items() if kernels}


def _medians(kernels: list[Kernel]) -> Kernel:
    threads = [kernel.thread_switches for kernel in kernels if kernel.thread_switches is not None]
    return Kernel(
        statistics.median(kernel.switches for kernel in kernels),
        statistics.median(kernel.user_ms for kernel in kernels),
        statistics.median(kernel.system_ms for kernel in kernels),
        statistics.median(threads) if threads else None,
    )


def render_kernel(costs: dict[str, Kernel], runs: int) -> str:
    rows = [
        [
            variant,
            f"{cost.switches:.1f}",
            "-" if cost.thread_switches is None else f"{cost.thread_switches:.1f}",
            f"{cost.user_ms:.2f}",
            f"{cost.system_ms:.2f}",
        ]
        for variant, cost in costs.items()
    ]
    header = [
        "variant",
        "voluntary switches per call",
        "of them, the analysis thread's",
        "user CPU per call, ms",
        "system CPU per call, ms",
    ]
    return (
        table(header, rows)
        + f"\n\nMedians over {runs} runs of {KERNEL_CALLS} calls each, without valgrind; CPU times"
        + " swing between runs of this shared machine, switch counts much less."
    )


def per_call(valgrind: str, variant: str, calls: int) -> Count:
    more, base = run(valgrind, variant, BASE_CALLS + calls), run(valgrind, variant, BASE_CALLS)
    return Count(
        (more.instructions - base.instructions) / calls, (more.measurements - base.measurements) / calls
    )


class Measured(NamedTuple):
    per_call: float  # histogram measurements an instrumented call makes
    price: float  # instructions the SDK spends on one


def render(costs: dict[str, float], measured: Measured | None = None) -> str:
    plain, instrumented = costs["plain"], costs.get("instrumented")
    rows = []
    for variant, cost in costs.items():
        over = f"{cost / plain - 1:+.1%}" if variant != "plain" else "-"
        rows.append([variant, f"{cost / 1e6:.2f}", over])
    parts = []
    if instrumented is not None and "patches" in costs:
        analysis = instrumented - costs["patches"]
        parts.append(f"The analysis adds {analysis / 1e6:.2f} M instructions per exchange")
        for variant, what in (("no-metrics", "the metrics"), ("no-wire", "the wire and the recording")):
            if variant in costs and analysis > 0:
                share = (instrumented - costs[variant]) / analysis
                parts.append(f"{what}: {(instrumented - costs[variant]) / 1e6:.2f} M ({share:.0%})")
    body = table(["variant", "M instructions per call", "over plain"], rows)
    if parts:
        body += "\n\n" + "; ".join(parts) + "."
    if measured is not None and "patches" in costs:
        body += "\n\n" + measurement_bound(plain, costs["patches"], measured)
    return body


def measurement_bound(plain: float, patches: float, measured: Measured) -> str:
    """What the histogram measurements alone cost, and the throughput they leave at most."""
    share = measured.per_call * measured.price / plain
    bound = 1 / (patches / plain + share)
    return (
        f"The OpenTelemetry SDK spends {measured.price / 1e3:.0f} k instructions on a histogram "
        f"measurement, and an instrumented call makes {measured.per_call:.1f}: {share:.1%} of a "
        f"plain call. With the patches' "
        f"{patches / plain - 1:+.1%}, a design that records them is bounded at {bound:.3f} of "
        f"plain's throughput, if throughput follows instructions, before a token is counted "
        f"(the saturation floor: {SATURATION_FLOOR})."
    )


def count_instructions(
    valgrind: str, variants: list[str], calls: int
) -> tuple[dict[str, float], Measured | None]:
    """Each variant's instructions per call, and what the histogram measurements cost."""
    costs: dict[str, float] = {}
    made: float | None = None
    for variant in variants:
        count = per_call(valgrind, variant, calls)
        costs[variant] = count.instructions
        if variant == "instrumented":
            made = count.measurements
        print(f"{variant}: {costs[variant] / 1e6:.2f} M instructions per call", flush=True)
    if made is None:
        return costs, None
    return costs, Measured(made, per_call(valgrind, "histogram", PRICED_MEASUREMENTS).instructions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=100, help="calls told apart per variant (default 100)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, plain first")
    parser.add_argument(
        "--kernel-runs", type=int, default=5, help="runs without valgrind per variant (default 5; 0: none)"
    )
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    valgrind = shutil.which("valgrind")
    variants = args.variants.split(",")
    if variants[0] != "plain":
        parser.error("the first variant must be plain: the others are compared with it")
    os.environ.setdefault("PYTHONHASHSEED", "0")  # the same dict layouts in every run
    with own_counting_service("mct-instructions-"):
        kernel = kernel_costs(args.kernel_runs) if args.kernel_runs > 0 else {}
        for variant, cost in kernel.items():
            print(f"{variant}: {cost.switches:.1f} voluntary switches per call", flush=True)
        if valgrind is None:
            body = "valgrind is not installed (Debian: apt-get install valgrind): instruction counts skipped."
        else:
            body = render(*count_instructions(valgrind, variants, args.calls))
    if kernel:
        body += "\n\nWhat the kernel does for a call, which instructions do not count:\n\n"
        body += render_kernel(kernel, args.kernel_runs)
    publish(body, args.markdown, "instructions", "tests.bench.instructions", argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
