# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The README's performance table, from the tables the benchmarks wrote into docs/performance.md.

    python -m tests.bench.summary [--performance docs/performance.md] [--readme README.md]

`make bench` runs it last. It reads each benchmark's section of docs/performance.md (the
tables between the `<!-- bench:NAME -->` markers) and replaces what stands between
`<!-- bench:summary -->` and `<!-- /bench:summary -->` in the README with one table of the
figures a user asks about first, and the machine they were measured on. A figure whose
benchmark has not written its section reads "not measured".
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ._doc import table

Rows = list[dict[str, str]]
_SECTION = re.compile(r"<!-- bench:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /bench:(?P=name) -->", re.DOTALL)
NOT_MEASURED = "not measured"


def sections(document: str) -> dict[str, str]:
    return {match["name"]: match["body"] for match in _SECTION.finditer(document)}


def tables(body: str) -> list[Rows]:
    """The rows of every markdown table in `body`, each row keyed by its table's header cells."""
    found: list[Rows] = []
    block: list[str] = []
    for line in [*body.splitlines(), ""]:
        if line.strip().startswith("|"):
            block.append(line.strip())
            continue
        if len(block) >= 2:
            header = _cells(block[0])
            found.append([dict(zip(header, _cells(row), strict=False)) for row in block[2:]])
        block = []
    return found


def first_table(body: str) -> Rows:
    found = tables(body)
    return found[0] if found else []


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def machine_of(body: str) -> str | None:
    match = re.search(r"^Machine: (.+?)\.?$", body, re.MULTILINE)
    return match.group(1) if match else None


# --- one figure per function: (what, figure) rows from a benchmark's section --------------------
def tool_calls(body: str) -> list[tuple[str, str]]:
    rows = [row for row in first_table(body) if row.get("transport") == "stdio"]
    out = []
    for row in rows:
        added, interval = row.get("p99 added ms", "-"), row.get("90% interval", "-")
        out.append(
            (
                f"a tool call over stdio, {row.get('payload')} result, client and server instrumented "
                f"(pause {row.get('pause ms')} ms after each)",
                f"median ×{row.get('ratio')}; p99 {_signed(added)} ms (90%: {interval})",
            )
        )
    return out


ADDED = "CPU added ms, median of rounds (90%)"


def startup(body: str) -> list[tuple[str, str]]:
    found = tables(body)
    out = []
    inside = found[1] if len(found) > 1 else []
    for row in inside:
        if row.get("median CPU ms"):
            out.append(
                (
                    "mcp-tokens' own start-up CPU in an MCP server (import, `instrument()`, patches)",
                    f"{row['median CPU ms']} ms median ({row.get('min', '?')} .. {row.get('max', '?')})",
                )
            )
    added = [
        f"{row['process']}: {row[ADDED]} ms (A/A {row.get('A/A ms (90%)', '?')})"
        for row in (found[0] if found else [])
        if row.get(ADDED)
    ]
    if added:
        out.append(
            (
                "whole-process start-up CPU added, median of rounds (90% interval; A/A: "
                "the machine's own noise, measured alike)",
                "; ".join(added),
            )
        )
    return out


def worker_cost(body: str) -> list[tuple[str, str]]:
    rows = [row for row in first_table(body) if row.get("rounds apart") == "10 ms"]
    if not rows:
        return []
    sizes = " / ".join(row["tool result"] for row in rows)
    own = " / ".join(row["this process, ms CPU"] for row in rows)
    service = " / ".join(row["counting service, ms CPU"] for row in rows)
    return [
        (f"CPU per counted exchange in the application, {sizes} result", f"{own} ms"),
        (f"CPU per counted exchange in the counting service, {sizes} result", f"{service} ms"),
    ]


def footprint(body: str) -> list[tuple[str, str]]:
    found = tables(body)
    checks = found[1] if len(found) > 1 else []
    return [(f"memory (PSS) {row['what mcp-tokens adds']}", f"{row['MB']} MB") for row in checks]


def saturation(body: str) -> list[tuple[str, str]]:
    out = []
    match = re.search(r"Instrumented throughput over plain \([^)]*\): ([\d.]+) \(([^)]*)\)(?:: (\w+))?", body)
    if match:
        value, interval, verdict = match.groups()
        quoted = f"{value} ({interval})" + (f": {verdict}" if verdict else "")
        out.append(("a saturated 2-worker gunicorn server, throughput instrumented / plain", quoted))
    runs = tables(body)[1] if len(tables(body)) > 1 else []
    if runs:
        recorded = all(row["calls"] == row["recorded"] for row in runs)
        errors = ", ".join(row["recorded sum"] for row in runs)
        exact = ", ".join(row["exact"] for row in runs)
        calls = "every response recorded" if recorded else "responses missing"
        out.append(("the same, counts and token sums", f"{calls}; sums {errors}; counted exactly {exact}"))
    return out


def engine(body: str) -> list[tuple[str, str]]:
    rows = first_table(body)
    out = []
    counting = [row for row in rows if row.get("check", "").startswith("exact count / tiktoken, 1 MB")]
    if counting:
        out.append(("exact counting against raw tiktoken, 1 MB of JSON", counting[0]["measured"]))
    # "padding detection alone, <input> (<size>)" measured as "<rate> MB/s = <ratio>x tiktoken".
    detection = [
        (float(row["measured"].split("= ")[1].split("x")[0]), row["measured"], row["check"])
        for row in rows
        if row.get("check", "").startswith("padding detection alone") and "= " in row.get("measured", "")
    ]
    if detection:
        _, measured, check = max(detection)
        name = check.split(", ", 1)[1].split(" (")[0]
        out.append(("padding detection, costliest input type against tiktoken", f"{measured} ({name})"))
    return out


def guard(body: str) -> list[tuple[str, str]]:
    out = []
    ratios = [
        f"×{row.get('ratio (median of rounds)', '?')} ({row['tools/call in memory'].split(' result')[0]}; "
        f"A/A {row.get('A/A off/off (90%)', '?')})"
        for row in first_table(body)
        if "fits by size" in row.get("tools/call in memory", "")
    ]
    if ratios:
        out.append(("a tool call with the guard on, result within the limit", "median " + ", ".join(ratios)))
    match = re.search(r"A 20 MB result cut to 25,000 tokens: ([\d.]+ ms) of CPU", body)
    if match:
        out.append(("the guard cutting a 20 MB result to 25,000 tokens", f"{match.group(1)} CPU"))
    return out


def exporters(body: str) -> list[tuple[str, str]]:
    found = tables(body)
    out = []
    rows = {row.get("step", ""): row.get("CPU ms", "") for row in (found[0] if found else [])}
    merge = next((step for step in rows if step.startswith("root merge")), None)
    stock = rows.get("stock exporter page, one process")
    if merge is not None and stock is not None:
        cost = f"{rows[merge]} ms CPU (one process's page: {stock} ms)"
        out.append((f"a multi-worker scrape: {merge}", cost))
    # The scrapes of the workers holding the 2,000 series (the table after the few series').
    for row in found[-1] if len(found) > 2 else []:
        if row.get("workers", "").startswith("notified"):
            out.append(
                (
                    "a multi-worker scrape, as Prometheus waits for it",
                    f"{row['median scrape ms']} ms median; each worker {row['wake-ups/s per worker']}"
                    " wake-ups/s between scrapes",
                )
            )
    return out


def claude(body: str) -> list[tuple[str, str]]:
    found = tables(body)
    speed = found[0] if found else []
    checks = {row.get("check", ""): row.get("measured", "") for row in (found[1] if len(found) > 1 else [])}
    out = []
    steady = checks.get("steady state, all corpora")
    ratios = sorted(float(row["ours / ctok"].rstrip("x")) for row in speed if row.get("ours / ctok"))
    if steady and ratios:
        faster = f"{ratios[0]:g}x .. {ratios[-1]:g}x ctok's speed"
        out.append(
            ("Claude counts (claude-4.7, equal to ctok's), steady state, all corpora", f"{steady} ({faster})")
        )
    memory = [f"{name[len('memory, ') :]} {value}" for name, value in checks.items() if "(ours)" in name]
    if memory:
        out.append(("a loaded Claude tokenizer, its caches filled", "; ".join(memory)))
    return out


_MEASUREMENT_BOUND = re.compile(r"([\d.]+%) of a plain call\..*? bounded at ([\d.]+) of plain's throughput")


def instructions(body: str) -> list[tuple[str, str]]:
    counted = [table for table in tables(body) if table and "over plain" in table[0]]
    rows = {row["variant"]: row for row in (counted[0] if counted else [])}
    if "instrumented" not in rows:
        return context_switches(body)
    measured = f"{rows['instrumented']['over plain']} over plain"
    if "patches" in rows:
        measured += f" (the patches alone {rows['patches']['over plain']})"
    figures = [("instructions per tool call (2-12 KB result), instrumented server", measured)]
    bound = _MEASUREMENT_BOUND.search(body)
    if bound is not None and "patches" in rows:
        share, most = bound.groups()
        figures.append(
            (
                "throughput left at most by the OpenTelemetry SDK's histogram measurements",
                f"{most} of plain (they cost {share} of a plain call's instructions, the patches "
                f"{rows['patches']['over plain']})",
            )
        )
    figures.extend(context_switches(body))
    return figures


def context_switches(body: str) -> list[tuple[str, str]]:
    """The kernel table (the instruction benchmark's second): switches per call."""
    kernel = [table for table in tables(body) if table and "voluntary switches per call" in table[0]]
    rows = {row["variant"]: row for row in (kernel[0] if kernel else [])}
    if "plain" not in rows or "instrumented" not in rows:
        return []
    key, thread = "voluntary switches per call", "of them, the analysis thread's"
    quoted = f"{rows['instrumented'][key]} instrumented"
    if rows["instrumented"].get(thread, "-") != "-":
        quoted += f" ({rows['instrumented'][thread]} of them the analysis thread's)"
    quoted += f", {rows['plain'][key]} plain"
    if "patches" in rows:
        quoted += f", {rows['patches'][key]} the patches alone"
    return [("voluntary context switches per tool call (the analysis thread's GIL hand-overs)", quoted)]


FIGURES: Sequence[tuple[str, Callable[[str], list[tuple[str, str]]]]] = (
    ("instrumented", tool_calls),
    ("startup", startup),
    ("worker-cost", worker_cost),
    ("footprint", footprint),
    ("saturation", saturation),
    ("instructions", instructions),
    ("engine", engine),
    ("guard", guard),
    ("exporters", exporters),
    ("claude", claude),
)


def summary(performance: str) -> str:
    found = sections(performance)
    rows: list[tuple[str, str]] = []
    machines = []
    for name, figures in FIGURES:
        body = found.get(name)
        produced = figures(body) if body is not None else []
        rows += produced or [(f"({name} benchmark)", NOT_MEASURED)]
        machine = machine_of(body) if body is not None else None
        if machine and machine not in machines:
            machines.append(machine)
    text = table(("what", "measured"), rows, right=(False, False))
    where = "; ".join(machines) if machines else "unknown"
    return f"{text}\n\nMeasured on: {where}."


def write_summary(readme: Path, performance: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    start, end = "<!-- bench:summary -->", "<!-- /bench:summary -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no section {start} ... {end}")
    body = summary(performance.read_text(encoding="utf-8"))
    readme.write_text(pattern.sub(lambda _: f"{start}\n{body}\n{end}", text, count=1), encoding="utf-8")


def _signed(value: str) -> str:
    return value if value.startswith(("-", "+")) or value == "-" else f"+{value}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--performance", type=Path, default=Path("docs/performance.md"))
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    args = parser.parse_args(argv)
    write_summary(args.readme, args.performance)
    print(f"{args.readme}: performance summary from {args.performance}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
