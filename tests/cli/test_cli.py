# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens` end to end against the fixture server: outputs (snapshots), hand-computed counts,
lock and diff, the risk gate and the dashboards subcommand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.mcp_tokens.cli.render import _tool_list
from opentelemetry.exporter.mcp_tokens.cli.rules import SERVER_RULES, TOOL_RULES
from opentelemetry.exporter.mcp_tokens.dashboards import render_all
from opentelemetry.instrumentation.mcp_tokens.engine import tokenizer
from opentelemetry.instrumentation.mcp_tokens.engine.blocks import TOOL_DEFINITION_FIELDS

from tests.cli import listings
from tests.cli.conftest import CliRunner, check_snapshot, fixture_server
from tests.structure_expected import structure_tokens


def compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def definition_tokens(o200k: Any, tool: dict[str, Any]) -> int:
    """By hand: tiktoken on the compact JSON of the fields a model is shown."""
    return len(o200k.encode_ordinary(compact({k: v for k, v in tool.items() if k in TOOL_DEFINITION_FIELDS})))


def test_profile_table(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--", *fixture_server("shop_v1"))
    assert (result.code, result.err) == (0, "")
    check_snapshot("profile_shop_v1.txt", result.out)


def test_profile_markdown_with_a_measured_call(run_cli: CliRunner) -> None:
    result = run_cli(
        "profile", "--format", "markdown", "--call", "search_products", "--args", '{"limit": 3}', "--",
        *fixture_server("shop_v2"),
    )  # fmt: skip
    assert (result.code, result.err) == (0, "")
    check_snapshot("profile_shop_v2_call.md", result.out)


def test_profile_json_of_a_bloated_server(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--format", "json", "--", *fixture_server("bloated"))
    assert result.code == 0
    check_snapshot("profile_bloated.json", result.out)
    rules = {r["rule"] for r in json.loads(result.out)["tools"][0]["recommendations"]}
    assert {"long-description", "huge-enum", "deep-schema", "many-output-fields", "many-parameters"} <= rules


def test_definition_tokens_match_tiktoken_by_hand(run_cli: CliRunner, o200k: Any) -> None:
    document = json.loads(run_cli("profile", "--format", "json", "--", *fixture_server("shop_v1")).out)
    expected = {tool["name"]: definition_tokens(o200k, tool) for tool in listings.shop_v1()}
    assert {tool["name"]: tool["definition"]["tokens"] for tool in document["tools"]} == expected
    assert document["totals"]["definition_tokens"] == sum(expected.values())
    assert all(tool["definition"]["exact"] for tool in document["tools"])
    assert document["totals"]["definition_share"] == round(sum(expected.values()) / 200_000, 6)


def test_pages_are_joined(run_cli: CliRunner) -> None:
    whole = run_cli("profile", "--format", "json", "--", *fixture_server("shop_v1"))
    paged = run_cli("profile", "--format", "json", "--", *fixture_server("shop_v1", "--page-size", "1"))
    assert paged.code == 0
    assert json.loads(paged.out)["tools"] == json.loads(whole.out)["tools"]


def test_other_encoding_and_window(run_cli: CliRunner, o200k: Any) -> None:
    cl100k = tokenizer.load_bundled_encoding("cl100k_base")
    args = ("profile", "--format", "json", "--encoding", "cl100k_base", "--context-window", "1000")
    document = json.loads(run_cli(*args, "--", *fixture_server("tiny")).out)
    (tool,) = listings.tiny()
    assert document["settings"]["encoding"] == "cl100k_base"
    assert document["tools"][0]["definition"]["tokens"] == definition_tokens(cl100k, tool)
    assert document["totals"]["definition_share"] == round(definition_tokens(cl100k, tool) / 1000, 6)


def test_measured_call_matches_hand_computation(run_cli: CliRunner, o200k: Any) -> None:
    args = ("profile", "--format", "json", "--call", "search_products", "--args", '{"limit": 4}')
    document = json.loads(run_cli(*args, "--", *fixture_server("shop_v1")).out)
    call = next(tool["call"] for tool in document["tools"] if tool["name"] == "search_products")
    wire = listings.call_result("search_products", {"limit": 4})
    assert wire is not None
    text, structured = wire["content"][0]["text"], wire["structuredContent"]
    count = o200k.encode_ordinary
    assert call["tokens"] == len(count(text)) + len(count(compact(structured)))
    assert call["overhead"] == {
        "duplicate": len(count(compact(structured))),  # structuredContent repeats the text block
        "formatting": len(count(text)) - len(count(compact(json.loads(text)))),  # the indentation
        "structure": structure_tokens(json.loads(text), len(count(text)), lambda t: len(count(t))),
    }
    assert (call["blocks"], call["risk"], call["is_error"], call["arguments"]) == (
        2,
        "low",
        False,
        {"limit": 4},
    )
    tool = next(tool for tool in document["tools"] if tool["name"] == "search_products")
    assert {"duplicated-content-measured", "formatting-measured"} <= {
        r["rule"] for r in tool["recommendations"]
    }


def test_an_error_result_is_profiled_not_fatal(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--format", "json", "--call", "get_product", "--", *fixture_server("shop_v1"))
    assert result.code == 0
    call = next(t["call"] for t in json.loads(result.out)["tools"] if t["name"] == "get_product")
    assert call["is_error"] is True


@pytest.mark.parametrize(("tier", "code"), [("critical", 0), ("high", 1), ("medium", 1)])
def test_fail_on_gates_on_the_worst_risk(run_cli: CliRunner, tier: str, code: int) -> None:
    result = run_cli("profile", "--fail-on", tier, "--", *fixture_server("shop_v1"))
    assert result.code == code
    if code:
        assert (
            result.err == f"mcp-tokens: risk at or above {tier}: search_products (high), get_product (high)\n"
        )


def test_fail_on_counts_a_measured_call(run_cli: CliRunner) -> None:
    args = ("profile", "--risk-thresholds", "50,100,200", "--fail-on", "critical", "--call", "ping")
    result = run_cli(*args, "--", *fixture_server("tiny"))
    assert result.code == 0  # ping's 8-token response is low even with these thresholds
    result = run_cli(*args[:-2], "--call", "search_products", "--", *fixture_server("shop_v1"))
    assert result.code == 1
    assert "search_products (critical)" in result.err


def test_lock_is_stable_and_matches_the_snapshot(run_cli: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "mcp-tokens.lock.json"
    result = run_cli("lock", "-o", str(path), "--", *fixture_server("shop_v1"))
    assert result.code == 0
    assert result.out == f"wrote {path}: 4 tools, 501 definition tokens, overall risk high\n"
    first = path.read_bytes()
    assert run_cli("lock", "-o", str(path), "--", *fixture_server("shop_v1", "--page-size", "3")).code == 0
    assert path.read_bytes() == first
    check_snapshot("shop_v1.lock.json", first.decode("utf-8"))


def test_lock_defaults_to_the_working_directory(
    run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("lock", "--", *fixture_server("tiny"))
    assert result.code == 0, result.err
    assert json.loads((tmp_path / "mcp-tokens.lock.json").read_text(encoding="utf-8"))["totals"]["tools"] == 1


@pytest.fixture
def shop_v1_lock(run_cli: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """shop_v1's lock as a short relative path (it appears in the snapshots), from a temporary cwd."""
    monkeypatch.chdir(tmp_path)
    path = Path("shop_v1.lock.json")
    assert run_cli("lock", "-o", str(path), "--", *fixture_server("shop_v1")).code == 0
    return path


def test_diff_against_an_upgraded_live_server(run_cli: CliRunner, shop_v1_lock: Path) -> None:
    table = run_cli("diff", str(shop_v1_lock), "--", *fixture_server("shop_v2"))
    assert table.code == 4
    check_snapshot("diff_shop_v1_v2.txt", table.out)
    markdown = run_cli("diff", str(shop_v1_lock), "--format", "markdown", "--", *fixture_server("shop_v2"))
    assert markdown.code == 4
    check_snapshot("diff_shop_v1_v2.md", markdown.out)


def test_an_upgrade_that_adds_an_unbounded_tool_is_risky(run_cli: CliRunner, shop_v1_lock: Path) -> None:
    result = run_cli("diff", str(shop_v1_lock), "--format", "json", "--", *fixture_server("shop_v1_export"))
    assert result.code == 3
    document = json.loads(result.out)
    assert document["worst"] == "risky"
    assert [(c["class"], c["kind"], c["tool"]) for c in document["changes"]] == [
        ("risky", "server-tax-growth", None),
        ("risky", "tool-added", "export_catalog"),
    ]
    assert "unbounded" in document["changes"][1]["message"]


def test_diff_of_two_lock_files(run_cli: CliRunner, shop_v1_lock: Path, tmp_path: Path) -> None:
    same = run_cli("diff", str(shop_v1_lock), str(shop_v1_lock))
    assert (same.code, same.out.splitlines()[0], same.out.splitlines()[-1]) == (
        0,
        "mcp-tokens diff: NO CHANGES",
        "No changes.",
    )
    v2 = tmp_path / "v2.json"
    assert run_cli("lock", "-o", str(v2), "--", *fixture_server("shop_v2")).code == 0
    assert run_cli("diff", str(shop_v1_lock), str(v2)).code == 4
    backwards = json.loads(run_cli("diff", str(v2), str(shop_v1_lock), "--format", "json").out)
    assert ("breaking", "tool-removed", "export_catalog") in [
        (c["class"], c["kind"], c["tool"]) for c in backwards["changes"]
    ]


def test_diff_with_other_settings_is_incompatible(
    run_cli: CliRunner, shop_v1_lock: Path, tmp_path: Path
) -> None:
    other = tmp_path / "cl100k.json"
    assert (
        run_cli("lock", "--encoding", "cl100k_base", "-o", str(other), "--", *fixture_server("shop_v1")).code
        == 0
    )
    result = run_cli("diff", str(shop_v1_lock), str(other))
    assert result.code == 21
    assert "different settings (encoding o200k_base vs cl100k_base)" in result.err


def test_rules_and_exit_codes_are_printed(run_cli: CliRunner) -> None:
    result = run_cli("rules")
    assert result.code == 0
    for rule in (*TOOL_RULES, *SERVER_RULES):
        assert f"| `{rule.id}` | {rule.severity.value} |" in result.out
    assert "| 13 | tools/list result over the size limits |" in result.out


def test_dashboards_delegates_to_the_generator(run_cli: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "dashboards"
    result = run_cli("dashboards", "--out", str(out))
    assert result.code == 0
    assert {line.removeprefix(f"wrote {out}/") for line in result.out.splitlines()} == set(render_all())
    assert run_cli("dashboards", "--out", str(out), "--check").code == 0
    (out / "runbook.md").write_text("edited\n", encoding="utf-8")
    stale = run_cli("dashboards", "--out", str(out), "--check")
    assert stale.code == 1
    assert f"stale: {out / 'runbook.md'}" in stale.err
    invalid = run_cli("dashboards", "--out", str(out), "--definition-share", "2")
    assert (invalid.code, invalid.err) == (
        2,
        "mcp-tokens: error: definition share must be a fraction in (0, 1), got 2.0\n",
    )


def test_a_tokenizer_file_names_the_encoding(run_cli: CliRunner) -> None:
    rank_file = str(tokenizer.DATA_DIR / "cl100k_base.tiktoken.gz")
    cl100k = tokenizer.load_bundled_encoding("cl100k_base")
    result = run_cli(
        "profile", "--format", "json", "--tokenizer-file", rank_file, "--", *fixture_server("tiny")
    )
    document = json.loads(result.out)
    assert document["settings"]["encoding"] == "cl100k_base"  # the file's name, as the engine reports it
    assert document["tools"][0]["definition"]["tokens"] == definition_tokens(cl100k, listings.tiny()[0])


def test_an_unloadable_tokenizer_file_is_refused(run_cli: CliRunner, tmp_path: Path) -> None:
    junk = tmp_path / "junk.tiktoken"
    junk.write_text("not a rank file\n", encoding="utf-8")
    result = run_cli("profile", "--tokenizer-file", str(junk), "--", *fixture_server("tiny"))
    assert result.code == 2
    assert result.err.startswith(f"mcp-tokens: error: cannot load tokenizer {junk}: TokenizerLoadError: ")
    assert result.err.count("\n") == 1


def test_identical_advice_is_given_once_for_all_its_tools(run_cli: CliRunner) -> None:
    markdown = run_cli("profile", "--format", "markdown", "--", *fixture_server("plain")).out
    (line,) = [line for line in markdown.splitlines() if "(unknown-bound)" in line]
    assert line.startswith("- **info** `list_orders`, `health`: No outputSchema: declare one")
    table = run_cli("profile", "--", *fixture_server("plain")).out
    assert table.count("No outputSchema: declare one") == 1
    assert "  info    list_orders, health No outputSchema: declare one" in table
    assert "  warning fetch_page          No outputSchema on an open-world tool (openWorldHint)" in table
    assert json.loads(run_cli("profile", "--format", "json", "--", *fixture_server("plain")).out)["tools"][1][
        "recommendations"
    ] == [
        {
            "rule": "unknown-bound",
            "severity": "info",
            "tool": "health",
            "message": "No outputSchema: declare one, with maxItems and maxLength, so its response size "
            "can be checked before it ships.",
        }
    ]


def test_a_clean_server_gets_no_recommendations(run_cli: CliRunner) -> None:
    result = run_cli("profile", "--format", "markdown", "--", *fixture_server("tiny"))
    assert result.out.endswith("\nNo recommendations.\n")


def test_long_tool_lists_in_the_terminal_name_the_first_three() -> None:
    assert _tool_list([]) == "(server)"
    assert _tool_list(["a", "b", "c"]) == "a, b, c"
    assert _tool_list(["a", "b", "c", "d", "e"]) == "a, b, c +2 more"


def test_host_cap_flags_tools_whose_worst_case_exceeds_it(run_cli: CliRunner) -> None:
    def flagged(*extra: str) -> dict[str, int]:
        document = json.loads(
            run_cli("profile", "--format", "json", *extra, "--", *fixture_server("shop_v1")).out
        )
        return {
            tool["name"]: tool["output"]["worst_case_tokens"]
            for tool in document["tools"]
            if "exceeds-host-cap" in {r["rule"] for r in tool["recommendations"]}
        }

    assert flagged() == {}  # nothing in the fixture reaches the default 25,000
    cap = 150
    low = flagged("--host-cap", str(cap))
    assert low and all(worst > cap for worst in low.values())
    document = json.loads(run_cli("profile", "--format", "json", "--", *fixture_server("shop_v1")).out)
    worst = {t["name"]: t["output"]["worst_case_tokens"] for t in document["tools"]}
    assert set(low) == {name for name, tokens in worst.items() if tokens is not None and tokens > cap}
