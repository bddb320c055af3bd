# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens profile --host NAME`, `--fail-on-host`, and options that are never abbreviated."""

from __future__ import annotations

import json

from tests.cli.conftest import CliRunner, fixture_server


def test_a_130_tool_server_is_over_vscodes_128_tool_limit(run_cli: CliRunner) -> None:
    run = run_cli("profile", "-q", "--host", "vscode", "--format", "json", "--", *fixture_server("tools_130"))
    assert run.code == 0, run.err  # reported, not gated without --fail-on-host
    (vscode,) = json.loads(run.out)["hosts"]
    assert vscode["host"] == "vscode" and vscode["exceeded"] is True
    (limit,) = vscode["limits"]
    assert (limit["kind"], limit["limit"], limit["value"]) == ("tools", 128, 130)
    assert limit["tools"] == ["tool_128", "tool_129"]  # the ones past the limit, in listing order


def test_fail_on_host_exits_1_when_a_host_is_exceeded_and_0_when_none_is(run_cli: CliRunner) -> None:
    over = run_cli("profile", "-q", "--host", "vscode", "--fail-on-host", "--", *fixture_server("tools_130"))
    assert over.code == 1
    assert "VS Code (Copilot): 130 tools, over its limit of 128" in over.err
    within = run_cli(
        "profile",
        "-q",
        "--host",
        "vscode",
        "--fail-on-host",
        "--format",
        "json",
        "--",
        *fixture_server("tools_20"),
    )
    assert within.code == 0, within.err
    assert json.loads(within.out)["hosts"][0]["exceeded"] is False


def test_several_hosts_and_a_measured_call_in_each_hosts_unit(run_cli: CliRunner) -> None:
    run = run_cli(
        "profile",
        "-q",
        "--host",
        "codex",
        "--host",
        "windsurf",
        "--host",
        "gemini",
        "--call",
        "tool_000",
        "--args",
        '{"lines": 300}',
        "--format",
        "json",
        "--",
        *fixture_server("tools_130"),
    )
    assert run.code == 0, run.err
    hosts = {entry["host"]: entry for entry in json.loads(run.out)["hosts"]}
    assert list(hosts) == ["codex", "windsurf", "gemini"]
    codex = {limit["kind"]: limit for limit in hosts["codex"]["limits"]}
    assert codex["lines"]["value"] == 300 and codex["lines"]["tools"] == ["tool_000"]
    assert codex["bytes"]["value"] > 10_240
    assert hosts["windsurf"]["limits"][0]["tools"] == [f"tool_{n:03d}" for n in range(50, 130)]
    assert hosts["gemini"]["exceeded"] is False


def test_the_table_and_markdown_name_the_host(run_cli: CliRunner) -> None:
    table = run_cli("profile", "-q", "--host", "cursor", "--", *fixture_server("tools_130"))
    assert "Cursor: 130 tools, over its limit of 80" in " ".join(table.out.split())
    markdown = run_cli(
        "profile", "-q", "--host", "cursor", "--format", "markdown", "--", *fixture_server("tools_20")
    )
    assert "- Cursor: within its limits" in markdown.out


def test_options_are_never_abbreviated(run_cli: CliRunner) -> None:
    # `--host 5` is a host name (and 5 is none), not `--host-cap 5`.
    host = run_cli("profile", "--host", "5", "--", *fixture_server("tools_20"))
    assert host.code == 2 and "invalid choice" in host.err
    abbreviated = run_cli("profile", "--host-c", "5", "--", *fixture_server("tools_20"))
    assert abbreviated.code == 2 and "unrecognized arguments: --host-c" in abbreviated.err
    assert run_cli("profile", "-q", "--host-cap", "5", "--", *fixture_server("tools_20")).code == 0


def test_encoding_takes_claude_names_and_names_a_bad_one(run_cli: CliRunner) -> None:
    bad = run_cli("profile", "--encoding", "gpt-9", "--", *fixture_server("tools_20"))
    assert bad.code == 2 and "claude-<version>" in bad.err
    old = run_cli("profile", "--encoding", "claude-2", "--", *fixture_server("tools_20"))
    assert old.code == 2 and "3.0 or later" in old.err
