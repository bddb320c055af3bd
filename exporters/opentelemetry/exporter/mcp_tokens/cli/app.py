# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens`: profile an MCP server's token economics, lock it, diff it, generate dashboards.

    mcp-tokens profile -- python my_server.py
    mcp-tokens profile --url http://127.0.0.1:8000/mcp --call search --args '{"q": "x"}'
    mcp-tokens lock -- python my_server.py                 # writes mcp-tokens.lock.json
    mcp-tokens diff mcp-tokens.lock.json -- python my_server.py
    mcp-tokens diff old.lock.json new.lock.json --format markdown
    mcp-tokens top http://127.0.0.1:9464/metrics             # live view of an instrumented process
    mcp-tokens dashboards --out dashboards/

Everything after `--` is the server command (stdio). Errors are one line on stderr with
an exit code from `errors.ExitCode`; `--debug` adds tracebacks and library logs.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.mcp_tokens.dashboards import __main__ as dashboards_main
from opentelemetry.exporter.mcp_tokens.textformat import plural, printable
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import token_encodings
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskTier

from . import connect, diff, lockfile, options, profile
from .errors import EXIT_CODE_TABLE, CliError, ExitCode
from .hosts import check_hosts, host_lines
from .rules import rule_table

PROG = "mcp-tokens"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    arguments, command = _split_command(arguments)
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_request:  # --help, or a usage error argparse already printed
        return exit_request.code if isinstance(exit_request.code, int) else int(ExitCode.USAGE)
    with _library_noise(args.debug):
        try:
            code: int = args.handler(args, tuple(command))
            return code
        except CliError as error:
            print(f"{PROG}: error: {_one_line(error.message)}", file=sys.stderr)
            return int(error.code)
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted", file=sys.stderr)
            return int(ExitCode.INTERRUPTED)
        except Exception as error:
            if args.debug:
                traceback.print_exc()
            print(
                f"{PROG}: internal error: {type(error).__name__}: {_one_line(str(error))} "
                "(a bug; rerun with --debug for a traceback)",
                file=sys.stderr,
            )
            return int(ExitCode.INTERNAL)


def _one_line(message: str) -> str:
    """A message as one printable line: it may quote a server's stderr, names or URLs."""

    return printable(" ".join(message.splitlines()))


def _split_command(arguments: list[str]) -> tuple[list[str], list[str]]:
    """Options before `--`, the server command after it."""
    if "--" in arguments:
        index = arguments.index("--")
        return arguments[:index], arguments[index + 1 :]
    return arguments, []


@contextlib.contextmanager
def _library_noise(debug: bool) -> Iterator[None]:
    """Silence SDK and transport logs and warnings (they would print tracebacks), unless --debug,
    which shows them all on stderr. The logging and warning state is restored afterwards."""
    root = logging.getLogger()
    level = root.level
    handler: logging.Handler = logging.StreamHandler(sys.stderr) if debug else logging.NullHandler()
    root.addHandler(handler)
    if debug:
        root.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default" if debug else "ignore")
            yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def build_parser() -> argparse.ArgumentParser:
    # allow_abbrev=False: an unknown `--host` must not be read as `--host-cap`.
    parser = argparse.ArgumentParser(
        prog=PROG,
        allow_abbrev=False,
        description="Token economics of an MCP server: definition tax, worst-case responses, risk, advice.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_exit_code_epilog(),
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and library logs")
    parser.set_defaults(handler=lambda args, command: _usage(parser), debug=False)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    profile_command = commands.add_parser(
        "profile",
        allow_abbrev=False,
        help="profile a server's tools",
        description="Profile a server: put its command after -- (stdio), or give --url.",
    )
    options.add_connection(profile_command, call_timeout=True)
    options.add_analysis(profile_command)
    options.add_output(profile_command)
    profile_command.add_argument(
        "--call", metavar="TOOL", help="also call TOOL and profile its real response"
    )
    profile_command.add_argument(
        "--args", metavar="JSON", default="{}", help="arguments of --call, a JSON object"
    )
    profile_command.add_argument(
        "--fail-on",
        choices=[tier.value for tier in RiskTier],
        help="exit 1 when any tool's worst case (or measured call) is at or above this risk tier",
    )
    flag = "flag tools whose worst case (or measured call) exceeds the result cap a host enforces"
    options.add_host_cap(profile_command, flag)
    options.add_hosts(profile_command, "check the server against a host's limits")
    profile_command.add_argument(
        "--fail-on-host",
        action="store_true",
        help="exit 1 when a --host would refuse, cut or drop anything (too many tools, a result over "
        "its limit)",
    )
    profile_command.set_defaults(handler=_run_profile)

    lock = commands.add_parser(
        "lock",
        allow_abbrev=False,
        help="write the server's token contract to a lock file",
        description="Write mcp-tokens.lock.json for a server: its command after -- (stdio), or --url.",
    )
    options.add_connection(lock, call_timeout=False)
    options.add_analysis(lock)
    lock.add_argument(
        "-o", "--output", type=Path, default=None, metavar="PATH", help="default: mcp-tokens.lock.json"
    )
    lock.set_defaults(handler=_run_lock)

    diff_command = commands.add_parser(
        "diff",
        allow_abbrev=False,
        help="classify the changes between two lock files, or a lock and a server",
        description="Compare OLD with NEW (a lock file) or a live server (its command after --, or --url).",
    )
    diff_command.add_argument("old", type=Path, help="the old lock file")
    diff_command.add_argument(
        "new", type=Path, nargs="?", help="the new lock file (or use --url / -- command)"
    )
    options.add_connection(diff_command, call_timeout=False)
    diff_command.add_argument(
        "--tokenizer-file", metavar="PATH", help="tokenizer file, when the lock used one"
    )
    diff_command.add_argument(
        "--tax-threshold",
        type=options.non_negative(float),
        default=10.0,
        metavar="PERCENT",
        help="definition-tax growth above this is RISKY (default: %(default)s%%)",
    )
    options.add_output(diff_command)
    diff_command.set_defaults(handler=_run_diff)

    top = commands.add_parser(
        "top",
        allow_abbrev=False,
        help="live token economics of an instrumented process, from its Prometheus /metrics",
        description="Scrape URL (a Prometheus /metrics endpoint of a process run under "
        "opentelemetry-instrument --metrics_exporter prometheus) and show tokens per second per tool, "
        "risk, overhead, padding and budget utilisation, refreshed until Ctrl-C.",
    )
    options.add_top(top)
    top.set_defaults(handler=_run_top)

    dashboards = commands.add_parser(
        "dashboards", help="generate the Grafana dashboards and Prometheus rules", allow_abbrev=False
    )
    dashboards_main.add_arguments(dashboards)
    dashboards.set_defaults(handler=_run_dashboards)

    rules = commands.add_parser(
        "rules", help="print the recommendation rules and the exit codes", allow_abbrev=False
    )
    rules.set_defaults(handler=_run_rules)
    return parser


def _exit_code_epilog() -> str:
    rows = "\n".join(f"  {int(code):>3}  {meaning}" for code, meaning in EXIT_CODE_TABLE)
    return f"exit codes:\n{rows}"


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_usage(sys.stderr)
    print(f"{PROG}: error: choose a command: profile, lock, diff, top, dashboards or rules", file=sys.stderr)
    return int(ExitCode.USAGE)


def _run_profile(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    from . import render  # noqa: PLC0415 -- rich loads for the subcommands that draw, not for --help

    target = options.required_target(args, command)
    call = options.tool_call(args)
    settings = options.settings(args)
    loader = profile.start_tokenizer(settings.encoding, args.tokenizer_file)
    chosen = tuple(dict.fromkeys(args.host))
    if call is not None:  # a measured result is counted in each host's own tokenizer too
        for encoding in token_encodings(chosen):
            profile.start_tokenizer(encoding)
    snapshot = _fetch(args, target, call)
    result = profile.build_profile(snapshot, profile.exact_counter(loader), settings, target.describe())
    if chosen:
        measured = (snapshot.call.call.name, snapshot.call.result) if snapshot.call is not None else None
        checks = check_hosts(chosen, [tool.name for tool in result.tools], measured, profile.any_counter)
        result = dataclasses.replace(result, hosts=checks)
    render.render_profile(result, render.OutputFormat(args.format), sys.stdout)
    return max(_risk_gate(result, args.fail_on), _host_gate(result, args.fail_on_host))


def _risk_gate(result: Any, fail_on: str | None) -> int:
    if fail_on is None:
        return int(ExitCode.OK)
    threshold = RiskTier(fail_on)
    offenders = []
    for tool in result.tools:
        tiers = [tool.risk] if tool.risk is not None else []
        if tool.call is not None:
            tiers.append(tool.call.analysis.risk)
        worst = max(tiers, key=lambda tier: tier.rank, default=None)
        if worst is not None and worst.rank >= threshold.rank:
            offenders.append(f"{tool.name} ({worst.value})")
    if not offenders:
        return int(ExitCode.OK)
    print(f"{PROG}: risk at or above {fail_on}: {', '.join(offenders)}", file=sys.stderr)
    return int(ExitCode.RISK_GATE)


def _host_gate(result: Any, fail_on_host: bool) -> int:
    exceeded = [check for check in result.hosts if check.exceeded]
    if not fail_on_host or not exceeded:
        return int(ExitCode.OK)
    lines = "; ".join(line for check in exceeded for line in host_lines([check]))
    print(f"{PROG}: over a host's limits: {lines}", file=sys.stderr)
    return int(ExitCode.RISK_GATE)


def _run_lock(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    target = options.required_target(args, command)
    settings = options.settings(args)
    loader = profile.start_tokenizer(settings.encoding, args.tokenizer_file)
    snapshot = _fetch(args, target, None)
    result = profile.build_profile(snapshot, profile.exact_counter(loader), settings, target.describe())
    path = args.output or Path(lockfile.DEFAULT_PATH)
    lock = lockfile.from_profile(result)
    lockfile.write(lock, path)
    risk = result.overall_risk.value if result.overall_risk is not None else "unknown"
    tools, tokens = len(lock.tools), lock.definition_tokens
    print(f"wrote {path}: {plural(tools, 'tool')}, {tokens:,} definition tokens, overall risk {risk}")
    return int(ExitCode.OK)


def _run_diff(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    from . import render  # noqa: PLC0415 -- rich loads for the subcommands that draw, not for --help

    old = lockfile.read(args.old)
    live = options.optional_target(args, command)
    if (args.new is None) == (live is None):
        raise CliError(
            ExitCode.USAGE, "diff needs a NEW lock file or a live server (--url or -- command), not both"
        )
    new = lockfile.read(args.new) if args.new is not None else _lock_live_server(args, live, old)
    result = diff.compare(old, new, args.tax_threshold / 100)
    render.render_diff(result, render.OutputFormat(args.format), sys.stdout)
    return int(result.exit_code)


def _lock_live_server(args: argparse.Namespace, target: Any, old: Any) -> Any:
    """Profile the live server with the old lock's settings, so the two are comparable."""
    encoding = old.settings.encoding
    if args.tokenizer_file is None and not options.is_known_encoding(encoding):
        raise CliError(
            ExitCode.USAGE, f"{args.old} was made with tokenizer {encoding!r}: pass --tokenizer-file"
        )
    loader = profile.start_tokenizer(encoding, args.tokenizer_file)
    snapshot = _fetch(args, target, None)
    result = profile.build_profile(snapshot, profile.exact_counter(loader), old.settings, target.describe())
    return lockfile.from_profile(result)


def _fetch(args: argparse.Namespace, target: Any, call: Any) -> Any:
    from . import render  # noqa: PLC0415 -- rich loads for the subcommands that draw, not for --help

    with render.Spinner(enabled=not args.quiet) as spinner:
        return connect.fetch(target, options.limits(args), spinner, call)


def _run_top(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    # rich and the report model load for `top` only, not for --help.
    from .top import run_top  # noqa: PLC0415

    if command:
        raise CliError(ExitCode.USAGE, "top takes a URL, not a command after --")
    return run_top(options.top_options(args))


def _run_dashboards(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    try:
        return dashboards_main.run(args)
    except ValueError as error:
        raise CliError(ExitCode.USAGE, str(error)) from None


def _run_rules(args: argparse.Namespace, command: tuple[str, ...]) -> int:
    print("| Rule | Severity | Message |\n|---|---|---|")
    for rule, severity, message in rule_table():
        print(f"| `{rule}` | {severity} | {message.replace('|', '/')} |")
    print("\n| Exit code | Meaning |\n|---:|---|")
    for code, meaning in EXIT_CODE_TABLE:
        print(f"| {int(code)} | {meaning} |")
    return int(ExitCode.OK)
