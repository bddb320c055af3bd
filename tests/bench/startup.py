# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What `instrument()` adds to a process's start: `python -m tests.bench.startup`.

Each run is a new interpreter (`python -c`): without mcp-tokens (U), the same again (A), and
with it (I), taking turns in every order so that a slow spell of the machine hits all three.
What is compared is the CPU time (user + system) of the whole process, read by the parent
when it exits: on a shared machine another process's burst would otherwise count against
one variant. The CPU added is the median of the differences within each round (I less U),
with a 90% interval from resampling the rounds: importing the MCP SDK alone varies by tens
of milliseconds from run to run, so one round says little and the interval says how much
the median can be trusted. A less U, two runs of the same process, is the machine's own
noise measured the same way (A/A): a row whose A/A interval reaches past the bound cannot
tell the bound from noise, so it is "unresolved" whatever the I less U interval says. The
difference of each variant's fastest run and the medians and wall times are printed beside.

Three kinds of process, each first loading what `opentelemetry-instrument` has loaded
before any instrumentor runs (the SDK's providers, `BaseInstrumentor`):
- an MCP server: `instrument()`, then the application imports the MCP SDK's server;
- a process that never imports the MCP SDK (a server's supervisor, the gunicorn master,
  multiprocessing's resource tracker): `instrument()` and nothing else;
- the same MCP server under the real `opentelemetry-instrument` launcher, mcp-tokens
  disabled (`OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`) against enabled.

No MCP message is exchanged, so no counting starts: what is measured is the
start-up alone. A row is "ok" when its interval lies under `--bound-ms` (50), "over" when
it lies above while the A/A interval lies within the bound either side, "unresolved"
otherwise (the machine too noisy to tell).

The whole-process rows carry the noise of everything else the process does. A second
table measures mcp-tokens' own code inside the MCP server's process, where that noise does
not reach: the CPU time of importing the package and `instrument()`, plus that of
installing the patches when the application imports the MCP SDK (the instrumentor's
post-import hook, timed around it). What this leaves out is only the interpreter's
teardown of the extra modules. Its verdict is the median's against the bound.

Exits 1 when any row is over.
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ._doc import add_markdown_option, publish, table

BOUND_MS = 50.0
PRELUDE = (
    "import opentelemetry.sdk.trace, opentelemetry.sdk.metrics\n"
    "import opentelemetry.instrumentation.instrumentor\n"
)
INSTRUMENT = (
    "from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor\n"
    "McpTokensInstrumentor().instrument()\n"
)
# mcp-tokens' own start-up, timed inside the process: the import and instrument(), then the
# patching that the application's import of the MCP SDK triggers (the post-import hook calls
# the instrumentor's _patch, wrapped here before instrument() binds it).
INSTRUMENT_TIMED = (
    "import time\n"
    "started = time.process_time()\n"
    "from opentelemetry.instrumentation.mcp_tokens import McpTokensInstrumentor\n"
    "spent = [0.0]\n"
    "patch = McpTokensInstrumentor._patch\n"
    "def timed_patch(self, *args):\n"
    "    began = time.process_time()\n"
    "    try:\n"
    "        return patch(self, *args)\n"
    "    finally:\n"
    "        spent[0] += time.process_time() - began\n"
    "McpTokensInstrumentor._patch = timed_patch\n"
    "McpTokensInstrumentor().instrument()\n"
    "spent[0] += time.process_time() - started\n"
)
REPORT_TIMED = "import sys\nsys.stdout.write(repr(spent[0]))\n"
# What an MCP server application imports, on either SDK line.
APPLICATION = (
    "try:\n"
    "    from mcp.server.mcpserver import MCPServer\n"
    "except ImportError:\n"
    "    from mcp.server.fastmcp import FastMCP\n"
)


# The orders of a round's three runs, taken in turn so that each variant runs first, second
# and last equally often.
ORDERS = list(itertools.permutations("UAI"))


@dataclass
class Row:
    name: str
    uninstrumented: list[str]
    instrumented: list[str]
    env_uninstrumented: dict[str, str] = field(default_factory=dict)
    env_instrumented: dict[str, str] = field(default_factory=dict)
    # (CPU s, wall s) per run; A is U run again, for the machine's own noise
    runs: dict[str, list[tuple[float, float]]] = field(default_factory=lambda: {"U": [], "A": [], "I": []})

    def fastest_added_cpu_ms(self) -> float:
        """The fastest instrumented run's CPU time less the fastest uninstrumented run's."""
        return 1000 * (min(c for c, _ in self.runs["I"]) - min(c for c, _ in self.runs["U"]))

    def paired_cpu_ms(self, variant: str) -> list[float]:
        """`variant` less U within each round."""
        return [1000 * (v[0] - u[0]) for u, v in zip(self.runs["U"], self.runs[variant], strict=False)]

    def added_cpu_ms(
        self, variant: str = "I", resamples: int = 2000, seed: int = 1
    ) -> tuple[float, float, float]:
        """The median of `variant` less U within each round, and its 90% interval (resampled
        rounds)."""
        added = self.paired_cpu_ms(variant)
        generator = random.Random(seed)
        medians = sorted(statistics.median(generator.choices(added, k=len(added))) for _ in range(resamples))
        return statistics.median(added), medians[int(0.05 * resamples)], medians[int(0.95 * resamples) - 1]

    def verdict(self, bound_ms: float) -> str:
        _, low, high = self.added_cpu_ms()
        if high <= bound_ms:
            return "ok"
        _, noise_low, noise_high = self.added_cpu_ms("A")
        quiet = -bound_ms <= noise_low and noise_high <= bound_ms
        return f"over {bound_ms:g}" if low > bound_ms and quiet else "unresolved"


def rows() -> list[Row]:
    python = [sys.executable, "-c"]
    found: list[Row] = [
        Row(
            "MCP server (imports the MCP SDK)",
            [*python, PRELUDE + APPLICATION],
            [*python, PRELUDE + INSTRUMENT + APPLICATION],
        ),
        Row("process that never imports the MCP SDK", [*python, PRELUDE], [*python, PRELUDE + INSTRUMENT]),
    ]
    launcher = shutil.which("opentelemetry-instrument", path=os.path.dirname(sys.executable))
    if launcher is not None:
        command = [
            launcher,
            "--traces_exporter",
            "none",
            "--metrics_exporter",
            "none",
            "--logs_exporter",
            "none",
            *python,
            APPLICATION,
        ]
        found.append(
            Row(
                "MCP server under opentelemetry-instrument",
                command,
                command,
                env_uninstrumented={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "mcp_tokens"},
                env_instrumented={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ""},
            )
        )
    return found


def run_once(command: list[str], extra_env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one process run to its end. Modules are loaded from
    their compiled bytecode, as an installed package's are (the warm-up runs write it)."""
    env = {**os.environ, **extra_env}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        error = process.stderr.read().decode(errors="replace") if process.stderr else ""
        raise RuntimeError(f"{command[:3]}... exited {process.returncode}: {error[-2000:]}")
    if process.stderr:
        process.stderr.close()
    return usage.ru_utime + usage.ru_stime, wall


def measure(row: Row, runs: int) -> None:
    for _ in range(2):  # the file cache and the bytecode, for both
        run_once(row.uninstrumented, row.env_uninstrumented)
        run_once(row.instrumented, row.env_instrumented)
    for index in range(runs):
        for variant in ORDERS[index % len(ORDERS)]:
            command, env = (
                (row.instrumented, row.env_instrumented)
                if variant == "I"
                else (row.uninstrumented, row.env_uninstrumented)
            )
            row.runs[variant].append(run_once(command, env))


def inside_cpu_ms(runs: int) -> list[float]:
    """mcp-tokens' own start-up CPU, ms, measured inside `runs` MCP server processes."""
    script = PRELUDE + INSTRUMENT_TIMED + APPLICATION + REPORT_TIMED
    found = []
    for _ in range(runs + 2):  # the first two write the bytecode
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"the timed start-up exited {done.returncode}: {done.stderr[-2000:]}")
        found.append(1000 * float(done.stdout.strip()))
    return found[2:]


def inside_verdict(samples: list[float], bound_ms: float) -> str:
    return "ok" if statistics.median(samples) <= bound_ms else f"over {bound_ms:g}"


def inside_table(samples: list[float], bound_ms: float) -> str:
    cells = [
        "MCP server: import, instrument(), patches on the SDK's import",
        len(samples),
        f"{statistics.median(samples):.1f}",
        f"{min(samples):.1f}",
        f"{max(samples):.1f}",
        inside_verdict(samples, bound_ms),
    ]
    header = ["mcp-tokens' own code, inside the process", "runs", "median CPU ms", "min", "max", "bound"]
    return table(header, [cells], [False, True, True, True, True, False])


def results_table(measured: list[Row], bound_ms: float) -> str:
    lines = []
    for row in measured:
        cpu = {v: 1000 * statistics.median(c for c, _ in runs) for v, runs in row.runs.items()}
        wall = {v: 1000 * statistics.median(w for _, w in runs) for v, runs in row.runs.items()}
        added, low, high = row.added_cpu_ms()
        noise, noise_low, noise_high = row.added_cpu_ms("A")
        lines.append(
            [
                row.name,
                len(row.runs["I"]),
                f"{added:.1f} ({low:.1f} .. {high:.1f})",
                f"{noise:.1f} ({noise_low:.1f} .. {noise_high:.1f})",
                f"{row.fastest_added_cpu_ms():.1f}",
                f"{cpu['U']:.0f}",
                f"{cpu['I']:.0f}",
                f"{wall['U']:.0f}",
                f"{wall['I']:.0f}",
                row.verdict(bound_ms),
            ]
        )
    header = [
        "process",
        "runs",
        "CPU added ms, median of rounds (90%)",
        "A/A ms (90%)",
        "fastest I - fastest U ms",
        "median CPU U ms",
        "median CPU I ms",
        "median wall U ms",
        "median wall I ms",
        "bound",
    ]
    return table(header, lines, [False, True, True, True, True, True, True, True, True, False])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="rounds (a run of each variant), taking turns")
    parser.add_argument("--bound-ms", type=float, default=BOUND_MS)
    add_markdown_option(parser)
    args = parser.parse_args(argv)
    measured = rows()
    for row in measured:
        print(f"  {row.name}", file=sys.stderr)
        measure(row, args.runs)
    print("  mcp-tokens' own code, inside the process", file=sys.stderr)
    inside = inside_cpu_ms(args.runs)
    print("process start-up, uninstrumented (U) and with mcp-tokens (I), alternating runs")
    rendered = results_table(measured, args.bound_ms) + "\n\n" + inside_table(inside, args.bound_ms)
    publish(rendered, args.markdown, "startup", "tests.bench.startup", argv)
    verdicts = {row.name: row.verdict(args.bound_ms) for row in measured}
    verdicts["mcp-tokens' own code, inside the process"] = inside_verdict(inside, args.bound_ms)
    over = [name for name, verdict in verdicts.items() if verdict.startswith("over")]
    if over:
        print(f"over {args.bound_ms:g} ms of CPU: {', '.join(over)}")
        return 1
    unresolved = [name for name, verdict in verdicts.items() if verdict == "unresolved"]
    if unresolved:
        print(f"too noisy to tell against {args.bound_ms:g} ms of CPU: {', '.join(unresolved)}")
    else:
        print(f"every row within {args.bound_ms:g} ms of CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
