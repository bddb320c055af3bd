# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Command-line options shared by the subcommands, and their conversion to typed settings."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from opentelemetry.exporter.mcp_tokens.report.economics import Price
from opentelemetry.exporter.mcp_tokens.report.settings import (
    CURRENCY,
    PRICE_PER_MTOK,
    parse_currency,
    price_from,
)
from opentelemetry.instrumentation.mcp_tokens.engine.claude_names import claude_version, family_of
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import HOSTS
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import DEFAULT_CONTEXT_WINDOW
from opentelemetry.instrumentation.mcp_tokens.engine.risk import DEFAULT_RISK_THRESHOLDS, RiskThresholds
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import BUNDLED

from .connect import Limits, Target, ToolCall, Transport
from .errors import CliError, ExitCode
from .profile import Settings
from .rules import DEFAULT_HOST_CAP
from .static import Assumptions

BUNDLED_ENCODINGS = tuple(sorted(BUNDLED))
N = TypeVar("N", int, float)

TOP_DEFAULT_MAX_BYTES = 32 * 1024 * 1024
TOP_DEFAULT_ROWS = 20
TOP_MAX_ROWS = 500


@dataclass(frozen=True)
class TopOptions:
    """What `mcp-tokens top` scrapes, how often, and how much of it it shows."""

    url: str
    interval_s: float = 2.0
    once: bool = False
    rows: int = TOP_DEFAULT_ROWS
    timeout_s: float = 5.0
    max_bytes: int = TOP_DEFAULT_MAX_BYTES
    price: Price | None = None
    host_cap: int = DEFAULT_HOST_CAP  # 0: not checked
    hosts: tuple[str, ...] = ()  # --host: whose limits to show


def positive(kind: Callable[[str], N]) -> Callable[[str], N]:
    return _bounded(kind, lambda value: value > 0, "a positive number")


def non_negative(kind: Callable[[str], N]) -> Callable[[str], N]:
    return _bounded(kind, lambda value: value >= 0, "a number >= 0")


def _bounded(kind: Callable[[str], N], ok: Callable[[N], bool], expected: str) -> Callable[[str], N]:
    def convert(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value) or (isinstance(value, float) and not math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return convert


def _risk_thresholds(text: str) -> RiskThresholds:
    try:
        return RiskThresholds.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def encoding(text: str) -> str:
    """A bundled encoding or a Claude one (`claude`, `claude-<version>`)."""
    name = text.strip()
    if name in BUNDLED_ENCODINGS:
        return name
    version = claude_version(name)
    if version is not None:
        try:
            family_of(version)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
        return name.lower()
    raise argparse.ArgumentTypeError(
        f"unknown encoding {text!r}; expected {', '.join(BUNDLED_ENCODINGS)}, claude or claude-<version>"
    )


def is_known_encoding(name: str) -> bool:
    """Whether `name` needs no tokenizer file (bundled, or a Claude encoding)."""
    return name in BUNDLED_ENCODINGS or claude_version(name) is not None


def add_connection(parser: argparse.ArgumentParser, *, call_timeout: bool) -> None:
    group = parser.add_argument_group("server (stdio: put the command after --)")
    group.add_argument(
        "--url", help="streamable HTTP (or --transport sse) endpoint, e.g. http://127.0.0.1:8000/mcp"
    )
    group.add_argument(
        "--transport",
        choices=[Transport.STREAMABLE_HTTP.value, Transport.SSE.value],
        default=Transport.STREAMABLE_HTTP.value,
        help="transport for --url (default: %(default)s)",
    )
    group.add_argument(
        "--header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="HTTP header for --url (repeatable)",
    )
    group.add_argument(
        "--protocol",
        choices=["auto", "legacy"],
        default="auto",
        help="mcp 2.x clients: probe server/discover first (auto) or always initialize (legacy)",
    )
    group.add_argument(
        "--timeout",
        type=positive(float),
        default=Limits.timeout_s,
        metavar="SECONDS",
        help="limit for starting, handshake and listing (default: %(default)s)",
    )
    if call_timeout:
        group.add_argument(
            "--call-timeout",
            type=positive(float),
            default=Limits.call_timeout_s,
            metavar="SECONDS",
            help="limit for --call (default: %(default)s)",
        )
    group.add_argument("-q", "--quiet", action="store_true", help="no progress spinner")


def add_analysis(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("analysis")
    group.add_argument(
        "--encoding",
        type=encoding,
        default="o200k_base",
        metavar="NAME",
        help=f"{', '.join(BUNDLED_ENCODINGS)}, claude or claude-<version> (e.g. claude-4.7; exact with "
        "the `claude` extra) (default: %(default)s)",
    )
    group.add_argument(
        "--tokenizer-file", metavar="PATH", help="a tiktoken BPE file or HuggingFace tokenizer.json"
    )
    risk = DEFAULT_RISK_THRESHOLDS
    group.add_argument(
        "--risk-thresholds",
        type=_risk_thresholds,
        default=risk,
        metavar="LOW,MEDIUM,HIGH",
        help=f"token bounds of the low/medium/high tiers (default: {risk.low},{risk.medium},{risk.high})",
    )
    group.add_argument(
        "--context-window",
        type=positive(int),
        default=DEFAULT_CONTEXT_WINDOW,
        metavar="TOKENS",
        help="window the definition tax is compared with (default: %(default)s)",
    )
    defaults = Assumptions()
    group.add_argument(
        "--chars-per-token",
        type=positive(float),
        default=defaults.chars_per_token,
        metavar="N",
        help="characters of free text per token in worst cases (default: %(default)s, a bound for ASCII)",
    )
    group.add_argument(
        "--assume-items",
        type=non_negative(int),
        default=defaults.unbounded_items,
        metavar="N",
        help="items assumed for a collection without maxItems (default: %(default)s)",
    )
    group.add_argument(
        "--assume-string-chars",
        type=non_negative(int),
        default=defaults.unbounded_string_chars,
        metavar="N",
        help="characters assumed for a string without maxLength (default: %(default)s)",
    )
    group.add_argument(
        "--no-text-copy",
        action="store_true",
        help="do not count the JSON text copy of structuredContent in worst cases",
    )


def add_host_cap(parser: argparse.ArgumentParser, purpose: str, *, zero_turns_off: bool = False) -> None:
    """`--host-cap TOKENS`: the result cap a host enforces, for `purpose` (the help's start)."""
    parser.add_argument(
        "--host-cap",
        type=non_negative(int) if zero_turns_off else positive(int),
        default=DEFAULT_HOST_CAP,
        metavar="TOKENS",
        help=f"{purpose} (default: %(default)s, Claude Code's MAX_MCP_OUTPUT_TOKENS"
        + ("; 0: do not count)" if zero_turns_off else ")"),
    )


def add_hosts(parser: argparse.ArgumentParser, purpose: str) -> None:
    """`--host NAME` (repeatable): the hosts (engine/hosts.py) whose limits to check."""
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        choices=list(HOSTS),
        metavar="NAME",
        help=f"{purpose}: {', '.join(HOSTS)} (repeatable)",
    )


def add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=["table", "markdown", "json"],
        default="table",
        help="output format (default: table)",
    )


def settings(args: argparse.Namespace) -> Settings:
    assumptions = Assumptions(
        chars_per_token=args.chars_per_token,
        unbounded_items=args.assume_items,
        unbounded_string_chars=args.assume_string_chars,
        text_copy=not args.no_text_copy,
    )
    host_cap = getattr(args, "host_cap", DEFAULT_HOST_CAP)  # only `profile` takes --host-cap
    return Settings(args.encoding, args.risk_thresholds, assumptions, args.context_window, host_cap)


def limits(args: argparse.Namespace) -> Limits:
    return Limits(timeout_s=args.timeout, call_timeout_s=getattr(args, "call_timeout", Limits.call_timeout_s))


def required_target(args: argparse.Namespace, command: tuple[str, ...]) -> Target:
    found = optional_target(args, command)
    if found is None:
        raise CliError(
            ExitCode.USAGE, "no server: give --url URL or a command after -- (e.g. -- python server.py)"
        )
    return found


def optional_target(args: argparse.Namespace, command: tuple[str, ...]) -> Target | None:
    if command and args.url:
        raise CliError(ExitCode.USAGE, "give either --url or a command after --, not both")
    if not command and not args.url:
        return None
    return Target(
        command=command,
        url=args.url,
        transport=Transport(args.transport) if args.url else Transport.STDIO,
        headers=tuple(_header(text) for text in args.header),
        protocol=args.protocol,
    )


def _header(text: str) -> tuple[str, str]:
    name, separator, value = text.partition(":")
    if not separator or not name.strip():
        raise CliError(ExitCode.USAGE, f"--header: expected 'NAME: VALUE', got {text!r}")
    return name.strip(), value.strip()


def tool_call(args: argparse.Namespace) -> ToolCall | None:
    if args.call is None:
        if args.args != "{}":
            raise CliError(ExitCode.USAGE, "--args needs --call TOOL")
        return None
    return ToolCall(args.call, parse_json_object(args.args, "--args"))


def parse_json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as error:
        raise CliError(ExitCode.USAGE, f"{flag}: not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise CliError(ExitCode.USAGE, f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


def add_top(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", help="the /metrics endpoint, e.g. http://127.0.0.1:9464/metrics")
    parser.add_argument(
        "--interval",
        type=positive(float),
        default=2.0,
        metavar="SECONDS",
        help="seconds between scrapes (default: %(default)s)",
    )
    parser.add_argument("--once", action="store_true", help="print one snapshot (totals, no rates) and exit")
    parser.add_argument(
        "--rows",
        type=_in_range(1, TOP_MAX_ROWS),
        default=TOP_DEFAULT_ROWS,
        metavar="N",
        help=f"rows shown, busiest first (default: %(default)s, at most {TOP_MAX_ROWS})",
    )
    parser.add_argument(
        "--timeout",
        type=positive(float),
        default=5.0,
        metavar="SECONDS",
        help="limit for one scrape (default: %(default)s)",
    )
    parser.add_argument(
        "--max-bytes",
        type=positive(int),
        default=TOP_DEFAULT_MAX_BYTES,
        metavar="N",
        help="largest /metrics answer read (default: %(default)s)",
    )
    parser.add_argument(
        "--price-per-mtok",
        type=_bounded(float, lambda value: math.isfinite(value) and value >= 0, "a number >= 0"),
        default=None,
        metavar="AMOUNT",
        help="price per million model input tokens: show what the traffic costs "
        f"(default: ${PRICE_PER_MTOK}, else no cost)",
    )
    parser.add_argument(
        "--currency",
        default=None,
        metavar="CODE",
        help=f"currency of --price-per-mtok (default: ${CURRENCY}, else USD)",
    )
    add_host_cap(parser, "count the responses over the result cap a host enforces", zero_turns_off=True)
    add_hosts(
        parser,
        "show what a host would refuse, cut or drop (responses over its limits, counted by "
        "the instrumentation for the hosts it was given; servers over its tool limit)",
    )


def _in_range(low: int, high: int) -> Callable[[str], int]:
    return _bounded(int, lambda value: low <= value <= high, f"an integer in {low}..{high}")


def top_options(args: argparse.Namespace) -> TopOptions:
    currency = args.currency if args.currency is not None else os.environ.get(CURRENCY, "")
    price: Price | None
    if args.price_per_mtok is not None:
        price = Price(args.price_per_mtok, parse_currency(currency))
    else:
        price = price_from(os.environ.get(PRICE_PER_MTOK, ""), currency, PRICE_PER_MTOK)
    return TopOptions(
        url=args.url,
        interval_s=args.interval,
        once=args.once,
        rows=args.rows,
        timeout_s=args.timeout,
        max_bytes=args.max_bytes,
        price=price,
        host_cap=args.host_cap,
        hosts=tuple(dict.fromkeys(args.host)),
    )
