# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A benchmark's table in its section of docs/performance.md.

Every benchmark takes `--markdown PATH`: it then replaces what stands between
`<!-- bench:NAME -->` and `<!-- /bench:NAME -->` in PATH with the command it ran, its table
and the machine it ran on (CPU model, cores, memory, kernel, Python, MCP SDK), so the
document is regenerated (`make bench`), never edited by hand. The text around the markers
(what is measured, how) is the document's own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def add_markdown_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--markdown",
        metavar="PATH",
        help="write the table into its section of this file (docs/performance.md)",
    )


def table(
    header: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[bool] | None = None
) -> str:
    """A markdown table; `right` says which columns are right-aligned (numbers)."""
    aligned = right or [index > 0 for index in range(len(header))]
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max(len(str(name)), *(len(row[i]) for row in cells)) for i, name in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        padded = [
            value.rjust(width) if right_aligned else value.ljust(width)
            for value, width, right_aligned in zip(values, widths, aligned, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = (
        "|"
        + "|".join(
            ("-" * (w + 1) + ":") if r else ("-" * (w + 2)) for w, r in zip(widths, aligned, strict=True)
        )
        + "|"
    )
    return "\n".join([line([str(name) for name in header]), rule, *(line(row) for row in cells)])


def machine() -> str:
    """CPU model, cores, memory, kernel, Python and MCP SDK of this run."""
    parts = [_cpu_model(), f"{os.cpu_count()} cores"]
    memory = _memory_gib()
    if memory is not None:
        parts.append(f"{memory:.0f} GiB")
    parts += [f"{platform.system()} {platform.release()}", f"Python {platform.python_version()}"]
    with contextlib.suppress(PackageNotFoundError):
        parts.append(f"mcp {version('mcp')}")
    return ", ".join(parts)


def write_section(
    path: str | Path, name: str, body: str, module: str, argv: Sequence[str] | None = None
) -> None:
    """Replace section `name` of `path` with `body`, the command that produced it and the
    machine. Raises ValueError when the file has no such section."""
    document = Path(path)
    text = document.read_text(encoding="utf-8")
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{document} has no section {start} ... {end}")
    section = f"{start}\n`{command(module, argv)}`\n\n{body.strip()}\n\nMachine: {machine()}.\n{end}"
    document.write_text(pattern.sub(lambda _: section, text, count=1), encoding="utf-8")


def publish(
    body: str, markdown: str | None, name: str, module: str, argv: Sequence[str] | None = None
) -> None:
    """Print a benchmark's `body`, and write it as section `name` of `markdown` when given."""
    print("\n" + body)
    if markdown:
        write_section(markdown, name, body, module, argv)


def command(module: str, argv: Sequence[str] | None = None) -> str:
    """The command line that ran, without `--markdown PATH`."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skip = False
    for argument in arguments:
        if skip:
            skip = False
            continue
        if argument == "--markdown":
            skip = True
            continue
        if argument.startswith("--markdown="):
            continue
        kept.append(f'"{argument}"' if " " in argument else argument)
    return " ".join(["python -m", module, *kept])


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / (1 << 20)
    except (OSError, ValueError):
        pass
    return None
