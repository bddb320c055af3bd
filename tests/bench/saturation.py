# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Counting under saturation: `python -m tests.bench.saturation`.

A 2-worker gunicorn server (uvicorn workers, stateless streamable HTTP,
`tests.bench.saturation_app`) is driven by 8 concurrent clients for 20 s, 4 on each worker
(keep-alive connections stay with the worker that accepted them), each calling
`records` as fast as it answers (results of 2-12 KB of JSON text, plus the same records as
structuredContent). Plain (`opentelemetry-instrument`, mcp-tokens disabled: the MCP SDK's
own spans cost the same in both) and instrumented (mcp-tokens on, `--metrics_exporter
mcp_tokens_prometheus`, a counting service of its own) runs alternate, so both see the same
machine; the server's CPU per call is read from /proc. The clients speak raw JSON-RPC over
HTTP (tests/e2e/raw_mcp.py): an SDK client would spend more CPU than the server it loads.

For each instrumented run, once the load stops, the endpoint is scraped until every
`tools/call` response is in `mcp_tokens_payload` (or 180 s passed), and the table gives:
the calls made; the responses recorded; their token sum against what the clients received
(o200k_base, the block rules of docs/telemetry.md); the share counted exactly (the rest is
estimated: `mcp_tokens_encoding="estimate"`); and how long after the load the last count
arrived. The floors: throughput at least 0.95 of plain (the median over four rounds of
each round's instrumented rate over its plain rate, each round's order the last one's
reversed), every response recorded, sums within 10%.

Rounds a minute apart differ by more than the floor's 5% margin on a shared machine, so
the throughput ratio comes with the 90% interval of that median (resampling the rounds).
A median under the floor fails the run only when the whole interval lies under it too;
otherwise the run says the floor was not resolved, and why, and does not fail on noise.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.os_names import ANALYSIS_THREAD
from prometheus_client.parser import text_string_to_metric_families

from examples.processes import HOST, REPO_ROOT, Child, child_env, free_port, launcher
from tests.e2e.expected import result_tokens
from tests.e2e.raw_mcp import RawSession

from ._doc import add_markdown_option, publish, table
from .footprint import cpu_s, service_cpu_s, stop_service, threads_cpu_s, tree
from .saturation_app import PATCHES_ONLY_ENV, WORKER_HEADER, result_of

WORKERS = 2
CLIENTS = 8
SEEDS = 100
SPREAD_ATTEMPTS = 20 * CLIENTS  # connections opened to spread the clients, at most
STARTUP_TIMEOUT_S = 60.0
CATCH_UP_TIMEOUT_S = 180.0
FLOORS = {"throughput": 0.95, "sum_error": 0.10}
# Variants beside the two compared (`--variants`), to see where time goes.
EXTRA_ENV = {
    "plain": {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "mcp_tokens"},
    "thread": {"OTEL_INSTRUMENTATION_MCP_TOKENS_ANALYSIS": "thread"},
    # Every payload over MAX_BYTES: it still crosses to the counting service, which answers
    # with its content-aware estimate instead of tokenizing: what the server pays when
    # counting itself costs next to nothing.
    "estimate": {"OTEL_INSTRUMENTATION_MCP_TOKENS_MAX_BYTES": "1"},
    # At most one exchange held for counting: nearly every payload is estimated on the call's
    # own thread from its length (`overload`), nothing goes to the counting service and back:
    # what the patches, spans and local estimates cost without the worker's round trips.
    "local": {"OTEL_INSTRUMENTATION_MCP_TOKENS_QUEUE_SIZE": "1"},
    # mcp-tokens' patches and spans, every span ended at the hand-off, nothing analysed: what
    # the request path costs without the analysis thread (saturation_app.py).
    "patches": {PATCHES_ONLY_ENV: "1"},
}
# Variants with mcp-tokens on, whose responses are checked against the endpoint.
COUNTED = ("instrumented", "thread", "estimate", "local")


@dataclass
class Run:
    variant: str
    calls: int
    seconds: float
    seeds: Counter[int]
    recorded: int = 0
    recorded_tokens: float = 0.0
    exact: int = 0
    catch_up_s: float | None = None
    server_cpu_s: float = 0.0  # the server's processes, during the load
    analysis_cpu_s: float = 0.0  # of it, their mcp-tokens threads'
    service_cpu_s: float = 0.0  # the counting service's, during the load

    @property
    def cpu_ms_per_call(self) -> float:
        return 1000 * self.server_cpu_s / self.calls

    @property
    def analysis_ms_per_call(self) -> float:
        return 1000 * self.analysis_cpu_s / self.calls

    @property
    def service_ms_per_call(self) -> float:
        return 1000 * self.service_cpu_s / self.calls

    @property
    def rate(self) -> float:
        return self.calls / self.seconds


def drive(port: int, seconds: float) -> tuple[int, float, Counter[int]]:
    """CLIENTS threads calling `records` until `seconds` have passed; (calls, seconds, seeds)."""
    seeds: Counter[int] = Counter()
    lock = threading.Lock()
    failures: list[str] = []
    sessions = spread_sessions(port)
    started = time.monotonic()
    deadline = started + seconds

    def client(index: int, session: RawSession) -> None:
        mine: Counter[int] = Counter()
        try:
            call = index
            while time.monotonic() < deadline:
                seed = call % SEEDS
                session.call_tool("records", {"seed": seed})
                mine[seed] += 1
                call += CLIENTS
        except Exception as exc:  # reported below: a failed run must not pass
            failures.append(f"client {index}: {exc!r}")
        finally:
            with contextlib.suppress(Exception):
                session.close()
            with lock:
                seeds.update(mine)

    threads = [threading.Thread(target=client, args=pair) for pair in enumerate(sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError("; ".join(failures[:3]))
    return sum(seeds.values()), time.monotonic() - started, seeds


def spread_sessions(port: int) -> list[RawSession]:
    """CLIENTS initialised sessions, CLIENTS // WORKERS on each worker.

    A keep-alive connection stays with the worker that accepted it, and which idle worker
    the kernel hands a new connection to is chance: 8 clients split 6/2 leave one worker
    short of work and halve what the run measures. A connection that lands on a worker
    already holding its share is closed and opened again.
    """
    share = CLIENTS // WORKERS
    kept: list[RawSession] = []
    per_worker: Counter[str] = Counter()
    for _ in range(SPREAD_ATTEMPTS):
        if len(kept) == CLIENTS:
            return kept
        session = RawSession(port)
        session.initialize()
        worker = session.last_headers.get(WORKER_HEADER, "")
        if worker and per_worker[worker] < share:
            per_worker[worker] += 1
            kept.append(session)
        else:
            session.close()
    for session in kept:
        with contextlib.suppress(Exception):
            session.close()
    raise RuntimeError(f"could not spread {CLIENTS} clients over {WORKERS} workers: {dict(per_worker)}")


def responses(metrics_port: int) -> tuple[int, float, int]:
    """(responses recorded, their token sum, those counted exactly) of tools/call, scraped."""
    with urllib.request.urlopen(f"http://{HOST}:{metrics_port}/metrics", timeout=10) as page:
        text = page.read().decode()
    count, total, exact = 0, 0.0, 0
    for family in text_string_to_metric_families(text):
        if family.name != "mcp_tokens_payload":
            continue
        for sample in family.samples:
            labels = sample.labels
            if (
                labels.get("mcp_method_name") != "tools/call"
                or labels.get("mcp_tokens_direction") != "response"
            ):
                continue
            if sample.name.endswith("_count"):
                count += int(sample.value)
                if labels.get("mcp_tokens_encoding") != "estimate":
                    exact += int(sample.value)
            elif sample.name.endswith("_sum"):
                total += sample.value
    return count, total, exact


def server_command(variant: str, port: int) -> list[str]:
    gunicorn = [str(Path(sys.executable).with_name("gunicorn")), "-k", "uvicorn_worker.UvicornWorker"]
    gunicorn += ["-w", str(WORKERS), "-b", f"{HOST}:{port}", "tests.bench.saturation_app:app"]
    if variant == "bare":
        return gunicorn
    otel = [launcher(), "--traces_exporter", "none", "--logs_exporter", "none"]
    exporter = "none" if variant == "plain" else "mcp_tokens_prometheus"
    return [*otel, "--metrics_exporter", exporter, *gunicorn]


def run(variant: str, seconds: float, warmup: float, workdir: Path) -> Run:
    """One server, warmed up (the counting service started), then loaded for `seconds`."""
    port, metrics_port = free_port(), free_port()
    counter_dir = workdir / f"counter-{time.monotonic_ns()}"
    env = {
        **EXTRA_ENV.get(variant, {}),
        "OTEL_INSTRUMENTATION_MCP_TOKENS_COUNTER_DIR": str(counter_dir),
        "OTEL_EXPORTER_PROMETHEUS_HOST": HOST,
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
    }
    log = workdir / f"{variant}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            server_command(variant, port), cwd=REPO_ROOT, env=child_env(env), stdout=out, stderr=out
        )
    child = Child(f"gunicorn ({variant})", process, log, (port,))
    try:
        child.wait_ready(STARTUP_TIMEOUT_S)
        warm_calls, _, warm_seeds = drive(port, warmup)
        # The analysis threads started with the warm-up's first exchanges.
        server = tree(process.pid)
        cpu_before, service_before = tree_cpu_s(process.pid), service_cpu_s(counter_dir) or 0.0
        analysis_before = threads_cpu_s(server, ANALYSIS_THREAD)
        calls, elapsed, seeds = drive(port, seconds)
        result = Run(
            variant,
            calls,
            elapsed,
            seeds + warm_seeds,
            server_cpu_s=tree_cpu_s(process.pid) - cpu_before,
            analysis_cpu_s=threads_cpu_s(server, ANALYSIS_THREAD) - analysis_before,
            service_cpu_s=(service_cpu_s(counter_dir) or 0.0) - service_before,
        )
        if variant in COUNTED:
            catch_up(result, warm_calls + calls, metrics_port)
        return result
    finally:
        child.stop()
        stop_service(counter_dir)


def tree_cpu_s(pid: int) -> float:
    """User and system CPU of `pid` and its descendants so far (Linux /proc)."""
    return sum(cpu_s(process) for process in tree(pid))


def catch_up(result: Run, calls: int, metrics_port: int) -> None:
    """Scrape until every call is recorded, or CATCH_UP_TIMEOUT_S passed."""
    started = time.monotonic()
    while True:
        result.recorded, result.recorded_tokens, result.exact = responses(metrics_port)
        if result.recorded >= calls:
            result.catch_up_s = time.monotonic() - started
            return
        if time.monotonic() - started > CATCH_UP_TIMEOUT_S:
            return
        time.sleep(0.5)


def expected_tokens(seeds: Counter[int]) -> int:
    tokens = {seed: result_tokens(result_of(seed)) for seed in seeds}
    return sum(tokens[seed] * calls for seed, calls in seeds.items())


@dataclass(frozen=True)
class Throughput:
    ratio: float  # the median over the rounds of each round's instrumented / plain rate
    low: float  # its 90% interval, from resampling the rounds
    high: float

    @property
    def verdict(self) -> str:
        """ "ok" at or over the floor; "under" when the whole interval lies under it;
        otherwise "unresolved": the rounds differ too much to tell."""
        floor = FLOORS["throughput"]
        if self.ratio >= floor:
            return "ok"
        return "under" if self.high < floor else "unresolved"


@dataclass(frozen=True)
class Verdict:
    throughput: Throughput | None  # None: no round ran both plain and instrumented
    rows: list[list[str]]
    missed: list[str]

    @property
    def ratio(self) -> float | None:
        return None if self.throughput is None else self.throughput.ratio


def round_ratios(runs: list[Run], per_round: int) -> list[float]:
    """Each round's instrumented rate over its plain rate.

    Plain's rate alone moves by tens of percent between runs a minute apart (a shared host):
    runs of one round saw nearly the same machine.
    """
    ratios = []
    for start in range(0, len(runs), per_round):
        rates = {r.variant: r.rate for r in runs[start : start + per_round]}
        if rates.get("plain") and "instrumented" in rates:
            ratios.append(rates["instrumented"] / rates["plain"])
    return ratios


def paired_ratio(runs: list[Run], per_round: int) -> float | None:
    """The median over the rounds of their ratios (it discards a round a slow spell split)."""
    ratios = round_ratios(runs, per_round)
    return statistics.median(ratios) if ratios else None  # None: no round ran both


def throughput_of(ratios: list[float], resamples: int = 2000, seed: int = 1) -> Throughput | None:
    if not ratios:
        return None
    generator = random.Random(seed)
    medians = sorted(statistics.median(generator.choices(ratios, k=len(ratios))) for _ in range(resamples))
    return Throughput(
        statistics.median(ratios), medians[int(0.05 * resamples)], medians[int(0.95 * resamples) - 1]
    )


def judge(runs: list[Run], per_round: int) -> Verdict:
    instrumented = [r for r in runs if r.variant == "instrumented"]
    throughput = throughput_of(round_ratios(runs, per_round))
    missed = []
    if throughput is not None and throughput.verdict == "under":
        missed.append(
            f"throughput {throughput.ratio:.3f} of plain ({throughput.low:.3f} .. {throughput.high:.3f})"
        )
    rows = []
    for index, r in enumerate(instrumented, 1):
        calls = sum(r.seeds.values())
        expected = expected_tokens(r.seeds)
        error = r.recorded_tokens / expected - 1 if expected else 0.0
        if r.recorded != calls:
            missed.append(f"run {index}: {r.recorded} of {calls} responses recorded")
        if abs(error) > FLOORS["sum_error"]:
            missed.append(f"run {index}: token sum {error:+.1%}")
        rows.append(
            [
                str(index),
                f"{r.rate:.0f}",
                f"{calls:,}",
                f"{r.recorded:,}",
                f"{expected:,}",
                f"{error:+.2%}",
                f"{r.exact / r.recorded:.0%}" if r.recorded else "-",
                "-" if r.catch_up_s is None else f"{r.catch_up_s:.0f}",
            ]
        )
    return Verdict(throughput, rows, missed)


def progress_line(r: Run) -> str:
    line = (
        f"{r.variant}: {r.rate:.0f} calls/s, server {r.cpu_ms_per_call:.2f} ms CPU/call "
        f"(analysis thread {r.analysis_ms_per_call:.2f}), counting service {r.service_ms_per_call:.2f}"
    )
    if r.variant in COUNTED:
        line += f"; {r.recorded:,} of {sum(r.seeds.values()):,} recorded, {r.exact:,} exactly"
    return line


def throughput_line(throughput: Throughput | None) -> str:
    if throughput is None:
        return "Instrumented throughput over plain: not measured (no round ran both)."
    floor = FLOORS["throughput"]
    line = (
        f"Instrumented throughput over plain (median of the rounds' ratios): {throughput.ratio:.3f} "
        f"(90% interval {throughput.low:.3f} .. {throughput.high:.3f}; floor {floor}): {throughput.verdict}."
    )
    if throughput.verdict == "unresolved":
        line += (
            f" The median is under the floor but the interval reaches over it: the rounds differ"
            f" by more than the floor's margin, so this run cannot tell whether {floor} is held."
        )
    return line


def render(runs: list[Run], verdict: Verdict) -> str:
    rates = [
        [
            r.variant,
            f"{r.rate:.0f}",
            f"{r.calls:,}",
            f"{r.cpu_ms_per_call:.2f}",
            f"{r.analysis_ms_per_call:.2f}",
            f"{r.service_ms_per_call:.2f}",
        ]
        for r in runs
    ]
    header = [
        "run",
        "calls/s",
        "calls",
        "recorded",
        "tokens received",
        "recorded sum",
        "exact",
        "last count, s",
    ]
    return (
        table(
            [
                "variant (in the order run)",
                "calls/s",
                "calls",
                "server CPU per call, ms",
                "of it, analysis threads, ms",
                "counting service CPU per call, ms",
            ],
            rates,
        )
        + f"\n\n{throughput_line(verdict.throughput)}"
        + (instrumented_table(header, verdict.rows) if verdict.rows else "")
    )


def instrumented_table(header: list[str], rows: list[list[str]]) -> str:
    return (
        "\n\n"
        + table(header, rows)
        + "\n\n`calls` includes the warm-up; `exact` is the share of responses counted exactly once the "
        + "load stopped (the rest estimated); `last count` is how long after the load it arrived."
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Counting under saturation: plain and instrumented, alternating."
    )
    parser.add_argument("--seconds", type=float, default=20.0, help="load per run (default 20)")
    parser.add_argument("--warmup", type=float, default=3.0, help="calls before the load (default 3 s)")
    parser.add_argument("--rounds", type=int, default=4, help="plain/instrumented pairs (default 4)")
    parser.add_argument(
        "--variants",
        default="plain,instrumented",
        help="run in turn (default plain,instrumented; also bare: no OpenTelemetry, "
        "thread: ANALYSIS=thread, estimate: nothing tokenized, local: nearly everything "
        "estimated in the server, patches: mcp-tokens' patches and spans, nothing analysed)",
    )
    add_markdown_option(parser)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="mct-saturation-"))
    try:
        runs = []
        variants = args.variants.split(",")
        for round_index in range(args.rounds):
            order = variants if round_index % 2 == 0 else variants[::-1]
            for variant in order:
                runs.append(run(variant, args.seconds, args.warmup, workdir))
                print(progress_line(runs[-1]), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    verdict = judge(runs, len(variants))
    body = render(runs, verdict)
    publish(body, args.markdown, "saturation", "tests.bench.saturation")
    if verdict.missed:
        print("missed: " + "; ".join(verdict.missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
