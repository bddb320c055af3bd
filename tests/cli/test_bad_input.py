# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Bad servers, bad files, bad flags: one line on stderr, a distinct exit code, nothing half-written."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens.cli import profile

from tests.cli import listings
from tests.cli.conftest import REPO_ROOT, CliRunner, fixture_server

SERVER = "python -m tests.cli.fixture_server --listing shop_v1"


def assert_one_line_error(result: object, code: int, fragment: str) -> None:
    assert result.code == code, result.err  # type: ignore[attr-defined]
    assert result.out == ""  # type: ignore[attr-defined]
    err: str = result.err  # type: ignore[attr-defined]
    assert err.startswith("mcp-tokens: error: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert fragment in err


@pytest.mark.parametrize(
    ("fault", "code", "fragment"),
    [
        (
            "exit-at-start",
            10,
            f"{SERVER} --fault exit-at-start: the server closed the connection (it probably exited) "
            "while waiting for the MCP handshake (server stderr: cannot open database shop.db)",
        ),
        (
            "crash-on-list",
            11,
            f"{SERVER} --fault crash-on-list: the server closed the connection (it probably exited) "
            "while listing tools (server stderr: fatal: catalog index is corrupt)",
        ),
        ("malformed", 12, "malformed tools/list result"),
        ("nameless", 12, "malformed tools/list result"),
        ("duplicate", 12, "malformed tools/list result: tool 'search_products' is listed twice"),
        ("too-many-tools", 13, "tools/list result too large: 10,001 tools (limit 10,000)"),
    ],
)
def test_misbehaving_servers(run_cli: CliRunner, fault: str, code: int, fragment: str) -> None:
    assert_one_line_error(
        run_cli("profile", "--", *fixture_server("shop_v1", "--fault", fault)), code, fragment
    )


def test_a_cursor_that_repeats(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--", *fixture_server("shop_v1", "--fault", "cursor-loop"))
    assert_one_line_error(
        result, 12, "malformed tools/list result: page 2 repeats cursor 'again' while listing tools"
    )


def test_a_server_that_never_answers_is_timed_out(run_cli: CliRunner) -> None:
    started = time.monotonic()
    result = run_cli("profile", "--timeout", "1", "--", *fixture_server("shop_v1", "--fault", "hang-on-list"))
    assert_one_line_error(result, 11, "--fault hang-on-list: no answer within 1 s while listing tools")
    assert time.monotonic() - started < 10  # the deadline, plus stopping the server


def test_an_enormous_listing(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--", *fixture_server("shop_v1", "--fault", "enormous"))
    assert_one_line_error(result, 13, "tools/list result too large: 17.0 MiB of definitions (limit 16 MiB)")


def test_a_command_that_does_not_exist(run_cli: CliRunner, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-server")
    result = run_cli("profile", "--", missing, "--flag")
    assert_one_line_error(
        result,
        10,
        f"{missing} --flag: cannot start the command (No such file or directory) while starting the server",
    )


def test_an_unreachable_url(run_cli: CliRunner) -> None:
    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}/mcp"
        result = run_cli("profile", "--url", url)
    assert_one_line_error(result, 10, f"{url}: cannot reach the server (ConnectError: ")
    assert result.err.rstrip().endswith("while connecting")


def test_a_call_that_never_returns_is_timed_out(run_cli: CliRunner) -> None:
    args = ("profile", "--call", "ping", "--call-timeout", "1", "--")
    result = run_cli(*args, *fixture_server("tiny", "--fault", "hang-on-call"))
    assert_one_line_error(result, 14, "--fault hang-on-call: no answer within 1 s while calling the tool")


def test_credentials_in_a_url_stay_out_of_messages(run_cli: CliRunner) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        result = run_cli("profile", "--url", f"http://user:s3cret@127.0.0.1:{port}/mcp")
    assert_one_line_error(
        result, 10, f"mcp-tokens: error: http://127.0.0.1:{port}/mcp: cannot reach the server"
    )
    assert "s3cret" not in result.err


def test_a_bug_is_reported_as_one_line_with_its_own_code(
    run_cli: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(profile, "build_profile", broken)
    result = run_cli("profile", "--", *fixture_server("tiny"))
    assert result.code == 70
    assert result.err == (
        "mcp-tokens: internal error: RuntimeError: simulated bug "
        "(a bug; rerun with --debug for a traceback)\n"
    )
    debug = run_cli("--debug", "profile", "--", *fixture_server("tiny"))
    assert debug.code == 70 and "Traceback (most recent call last)" in debug.err


def test_an_unknown_tool_call(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--call", "nope", "--", *fixture_server("shop_v1"))
    assert_one_line_error(result, 14, "JSON-RPC error -32602: Unknown tool: nope while calling the tool")


def test_a_failed_lock_writes_nothing(run_cli: CliRunner, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.lock.json"
    result = run_cli("lock", "-o", str(fresh), "--", *fixture_server("shop_v1", "--fault", "crash-on-list"))
    assert result.code == 11
    existing = tmp_path / "existing.lock.json"
    existing.write_text("kept\n", encoding="utf-8")
    assert (
        run_cli("lock", "-o", str(existing), "--", *fixture_server("shop_v1", "--fault", "malformed")).code
        == 12
    )
    assert existing.read_text(encoding="utf-8") == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["existing.lock.json"]


def test_a_lock_from_an_incompatible_version(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "future.lock.json"
    assert run_cli("lock", "-o", str(path), "--", *fixture_server("tiny")).code == 0
    document = json.loads(path.read_text(encoding="utf-8"))
    document["version"] = 2
    path.write_text(json.dumps(document), encoding="utf-8")
    result = run_cli("diff", str(path), "--", *fixture_server("tiny"))
    assert_one_line_error(
        result,
        21,
        f"{path}: lock file format version 2 is not supported (this mcp-tokens reads version 1); "
        "regenerate it with `mcp-tokens lock`",
    )


def test_a_corrupt_lock(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.json"
    path.write_text('{"format": "mcp-tokens.lock", "version": 1, "tools": ', encoding="utf-8")
    assert_one_line_error(run_cli("diff", str(path), str(path)), 20, f"{path}: not valid JSON")


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (("profile",), "no server: give --url URL or a command after --"),
        (("profile", "--url", "http://127.0.0.1:1/mcp", "--", "python"), "give either --url or a command"),
        (
            ("profile", "--call", "x", "--args", "[1]", "--", "python"),
            "--args: expected a JSON object, got list",
        ),
        (("profile", "--call", "x", "--args", "{", "--", "python"), "--args: not valid JSON"),
        (("profile", "--args", '{"a": 1}', "--", "python"), "--args needs --call TOOL"),
        (("profile", "--url", "http://x/mcp", "--header", "nocolon"), "--header: expected 'NAME: VALUE'"),
        (("diff", "a.json"), "cannot read a.json"),
    ],
)
def test_usage_errors(run_cli: CliRunner, argv: tuple[str, ...], fragment: str) -> None:
    result = run_cli(*argv)
    assert_one_line_error(result, 20 if argv[0] == "diff" else 2, fragment)


@pytest.mark.parametrize(
    "argv",
    [
        ("profile", "--timeout", "0", "--", "x"),
        ("profile", "--fail-on", "extreme"),
        ("lock", "--assume-items", "-1"),
    ],
)
def test_argparse_rejects_bad_values(run_cli: CliRunner, argv: tuple[str, ...]) -> None:
    result = run_cli(*argv)
    assert result.code == 2
    assert "Traceback" not in result.err and "error: argument" in result.err


def test_diff_needs_exactly_one_new_side(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "a.lock.json"
    assert run_cli("lock", "-o", str(path), "--", *fixture_server("tiny")).code == 0
    assert_one_line_error(run_cli("diff", str(path)), 2, "diff needs a NEW lock file or a live server")
    both = run_cli("diff", str(path), str(path), "--", *fixture_server("tiny"))
    assert_one_line_error(both, 2, "not both")


def _cli(*argv: str, stderr: object = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "opentelemetry.exporter.mcp_tokens.cli", *argv],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=stderr,  # type: ignore[arg-type]
        text=True,
        timeout=60,
        check=False,
    )


def test_a_real_process_prints_one_line_and_no_traceback() -> None:
    completed = _cli("profile", "--", *fixture_server("shop_v1", "--fault", "crash-on-list"))
    assert completed.returncode == 11
    assert completed.stdout == ""
    assert completed.stderr.count("\n") == 1 and "Traceback" not in completed.stderr


def test_progress_is_shown_on_a_terminal() -> None:
    controller, terminal = pty.openpty()
    try:
        completed = _cli("profile", "--", *fixture_server("shop_v1", "--page-size", "2"), stderr=terminal)
        os.close(terminal)
        terminal = -1
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    assert completed.returncode == 0
    progress = shown.decode("utf-8", "replace")
    for message in (
        "Starting python -m tests.cli.fixture_server",
        "Waiting for the MCP handshake",
        "Listing tools (page 2, 2 so far)",
    ):
        assert message in progress
    assert "mcp-tokens profile: fixture-shop" in completed.stdout  # the table still goes to stdout


def test_ctrl_c_stops_cleanly(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    argv = [sys.executable, "-m", "opentelemetry.exporter.mcp_tokens.cli", "profile", "--"]
    listed = tmp_path / "listed"
    process = subprocess.Popen(
        [*argv, *fixture_server("shop_v1", "--fault", "hang-on-list", "--listed-file", str(listed))],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    # Ctrl-C while the CLI waits for the listing (not while it is still importing).
    deadline = time.monotonic() + 60
    while not listed.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert listed.exists(), "the CLI never asked for the listing"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert (process.returncode, out, err) == (130, "", "mcp-tokens: interrupted\n")


def test_hostile_names_stay_inert_in_every_format(run_cli: CliRunner) -> None:
    table = run_cli("profile", "--", *fixture_server("hostile"))
    assert table.code == 0, table.err
    assert "\x1b" not in table.out and "\x07" not in table.out
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in table.out  # shown, not sent to the terminal
    assert "[/bold]" in table.out  # printed as text, not taken as rich markup
    markdown = run_cli("profile", "--format", "markdown", "--", *fixture_server("hostile")).out
    outside_code = re.sub(r"(`+)(.+?)\1", "", markdown)
    assert "![" not in outside_code  # an image needs "![": the bracket is escaped ("!\\[")
    ours = ("<sub>", "</sub>", "<version>")  # the renderer's own tags, and conftest.normalise's
    assert re.search(r"(?<!\\)<", re.sub("|".join(ours), "", outside_code)) is None
    assert "``evil`\\[/bold]" not in markdown  # names are code spans fenced past their backticks
    assert "``evil`[/bold]\\x1b]0;pwned" in markdown
    document = json.loads(run_cli("profile", "--format", "json", "--", *fixture_server("hostile")).out)
    assert document["tools"][0]["name"] == listings.HOSTILE_NAME  # JSON keeps the exact name
    assert document["tools"][0]["output"]["unbounded"][0]["path"].endswith(
        json.dumps(listings.HOSTILE_FIELD) + "]"
    )
