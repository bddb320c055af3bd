# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""``python -m opentelemetry.exporter.mcp_tokens.dashboards``: write or check the files.

Exit status: 0 when the files were written or are up to date, 1 when ``--check`` finds
files that regenerating would change, 2 on invalid arguments. A CLI that wants this as
a subcommand calls `add_arguments` on its subparser and `run` with the parsed namespace.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from opentelemetry.instrumentation.mcp_tokens.engine.hosts import HOSTS
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import BudgetThresholds
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds

from .generate import stale_files, write_all
from .settings import GeneratorSettings

T = TypeVar("T")


def _parsed(parse: Callable[[str], T]) -> Callable[[str], T]:
    """Report a parser's own message (it names the bad input) instead of argparse's generic one."""

    def convert(text: str) -> T:
        try:
            return parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None

    return convert


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = GeneratorSettings()
    risk, budget = defaults.risk, defaults.budget
    parser.add_argument(
        "--out", type=Path, default=Path("dashboards"), help="output directory (default: %(default)s)"
    )
    parser.add_argument(
        "--risk-thresholds",
        type=_parsed(RiskThresholds.parse),
        default=risk,
        metavar="LOW,MEDIUM,HIGH",
        help=f"token bounds of the low/medium/high tiers (default: {risk.low},{risk.medium},{risk.high})",
    )
    parser.add_argument(
        "--budget-thresholds",
        type=_parsed(BudgetThresholds.parse),
        default=budget,
        metavar="WARNING,CRITICAL",
        help=f"context-window fractions of the budget levels (default: {budget.warning},{budget.critical})",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=defaults.context_window,
        metavar="TOKENS",
        help="context window the definition tax is compared with (default: %(default)s)",
    )
    parser.add_argument(
        "--definition-share",
        type=float,
        default=defaults.definition_share,
        metavar="FRACTION",
        help="alert when one server's definitions exceed this share of the window (default: %(default)s)",
    )
    parser.add_argument(
        "--overhead-share",
        type=float,
        default=defaults.overhead_share,
        metavar="FRACTION",
        help="alert when this share of a tool's response tokens is overhead (default: %(default)s)",
    )
    parser.add_argument(
        "--host-cap",
        type=int,
        default=defaults.host_cap,
        metavar="TOKENS",
        help="alert when a tool's responses exceed this many tokens, the result cap of your hosts "
        "(default: %(default)s, Claude Code's MAX_MCP_OUTPUT_TOKENS)",
    )
    parser.add_argument(
        "--host",
        action="append",
        choices=list(HOSTS),
        metavar="NAME",
        help=f"compare servers' tool counts with this host's tool limit (repeatable; {', '.join(HOSTS)}; "
        "default: every host with one)",
    )
    parser.add_argument(
        "--runbook-url",
        default=defaults.runbook_url,
        metavar="URL",
        help="runbook.md location the alerts link to, e.g. on your Git forge (default: %(default)s)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if regenerating would change any file",
    )


def settings_from_args(args: argparse.Namespace) -> GeneratorSettings:
    return GeneratorSettings(
        risk=args.risk_thresholds,
        budget=args.budget_thresholds,
        context_window=args.context_window,
        definition_share=args.definition_share,
        overhead_share=args.overhead_share,
        runbook_url=args.runbook_url,
        host_cap=args.host_cap,
        hosts=tuple(dict.fromkeys(args.host)) if args.host else tuple(HOSTS),
    )


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    out: Path = args.out
    if args.check:
        stale = stale_files(out, settings)
        for path in stale:
            print(f"stale: {out / path}", file=sys.stderr)
        if stale:
            print(
                "regenerate with: python -m opentelemetry.exporter.mcp_tokens.dashboards --out "
                f"{out} (plus the same threshold options)",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in write_all(out, settings):
        print(f"wrote {out / path}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m opentelemetry.exporter.mcp_tokens.dashboards",
        description="Generate the mcp-tokens dashboards, Prometheus rules, Grafana alerts and runbook.",
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as error:
        parser.error(str(error))  # exits with status 2


if __name__ == "__main__":
    sys.exit(main())
