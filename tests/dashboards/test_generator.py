# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The committed files are exactly what the generator writes, and the CLI behaves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.exporter.mcp_tokens.dashboards import (
    AlertTiming,
    GeneratorSettings,
    render_all,
    stale_files,
    write_all,
)
from opentelemetry.exporter.mcp_tokens.dashboards.__main__ import main
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import DEFAULT_CONTEXT_WINDOW, BudgetThresholds
from opentelemetry.instrumentation.mcp_tokens.engine.risk import DEFAULT_RISK_THRESHOLDS, RiskThresholds

from .conftest import DASHBOARDS

MODULE = "opentelemetry.exporter.mcp_tokens.dashboards"


def test_regenerating_gives_byte_identical_files(tmp_path: Path) -> None:
    written = write_all(tmp_path)
    assert sorted(written) == sorted(render_all())
    for relative in written:
        assert (tmp_path / relative).read_bytes() == (DASHBOARDS / relative).read_bytes(), (
            f"dashboards/{relative} is stale: run python -m {MODULE} --out dashboards"
        )


def test_committed_files_are_up_to_date() -> None:
    assert stale_files(DASHBOARDS) == []


def test_defaults_are_the_instrumentations() -> None:
    settings = GeneratorSettings()
    assert settings.risk == DEFAULT_RISK_THRESHOLDS
    assert settings.budget == BudgetThresholds()
    assert settings.context_window == DEFAULT_CONTEXT_WINDOW


def test_writing_twice_changes_nothing(tmp_path: Path) -> None:
    write_all(tmp_path)
    assert write_all(tmp_path) == []


def test_check_mode_exits_zero_when_up_to_date_and_one_when_stale(tmp_path: Path) -> None:
    write_all(tmp_path)
    assert main(["--out", str(tmp_path), "--check"]) == 0
    alerts = tmp_path / "prometheus" / "alerts.yaml"
    alerts.write_text(alerts.read_text(encoding="utf-8").replace("> 8000", "> 9000"), encoding="utf-8")
    (tmp_path / "runbook.md").unlink()
    assert main(["--out", str(tmp_path), "--check"]) == 1
    assert sorted(stale_files(tmp_path)) == ["prometheus/alerts.yaml", "runbook.md"]
    # --check writes nothing.
    assert not (tmp_path / "runbook.md").exists()


def test_check_mode_fails_when_thresholds_differ_from_the_files() -> None:
    assert main(["--out", str(DASHBOARDS), "--check", "--risk-thresholds", "2000,6000,12000"]) == 1


def test_custom_thresholds_reach_every_form(tmp_path: Path) -> None:
    code = main(
        [
            "--out",
            str(tmp_path),
            "--risk-thresholds",
            "2000,6000,12000",
            "--budget-thresholds",
            "0.8,0.95",
            "--context-window",
            "128000",
            "--definition-share",
            "0.2",
            "--runbook-url",
            "https://git.example/mcp-tokens/blob/main/dashboards/runbook.md",
        ]
    )
    assert code == 0
    alerts = (tmp_path / "prometheus" / "alerts.yaml").read_text(encoding="utf-8")
    grafana = (tmp_path / "grafana-alerting" / "mcp-tokens-alerts.yaml").read_text(encoding="utf-8")
    runbook = (tmp_path / "runbook.md").read_text(encoding="utf-8")
    tool = (tmp_path / "grafana" / "mcp-tokens-tool.json").read_text(encoding="utf-8")
    assert "\n      > 12000\n" in alerts and "\n      > 6000\n" in alerts
    assert "\n      > 25600\n" in alerts  # 0.2 x 128000 definition tokens
    assert "reached 95% of their context window" in alerts
    assert "https://git.example/mcp-tokens/blob/main/dashboards/runbook.md#mcptoolresponsescritical" in alerts
    assert "- 12000\n" in grafana
    assert "12000 tokens" in runbook and "128000-token" in runbook
    assert '"value": 12000' in tool
    assert not re.search(r"\b8000\b", alerts)


def test_the_module_runs_as_a_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", MODULE, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"wrote {tmp_path / 'prometheus' / 'alerts.yaml'}" in result.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--risk-thresholds", "1000,8000"], "expected three comma-separated integers, got '1000,8000'"),
        (["--risk-thresholds", "5000,4000,8000"], "must be increasing"),
        (["--budget-thresholds", "75,90"], "invalid budget thresholds '75,90'"),
        (["--context-window", "0"], "context window must be a positive number of tokens, got 0"),
        (["--definition-share", "1.5"], "definition share must be a fraction in (0, 1), got 1.5"),
    ],
)
def test_bad_options_name_the_bad_input(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_alert_timing_reaches_rules_and_rejects_non_durations() -> None:
    fast = render_all(GeneratorSettings(timing=AlertTiming.fast()))["prometheus/alerts.yaml"]
    assert "for: 0s" in fast and "[30s]" in fast and "for: 10m" not in fast
    # Recording rules keep their 5m window: their names say rate5m.
    assert (
        render_all(GeneratorSettings(timing=AlertTiming.fast()))["prometheus/rules.yaml"]
        == (render_all()["prometheus/rules.yaml"])
    )
    with pytest.raises(ValueError, match="window must be a Prometheus duration like 5m, got '5 minutes'"):
        AlertTiming(window="5 minutes")


def test_settings_reject_bad_values_directly() -> None:
    with pytest.raises(ValueError, match="runbook URL"):
        GeneratorSettings(runbook_url="has space")
    assert GeneratorSettings(context_window=128_000, definition_share=0.1).definition_budget_tokens == 12_800
    assert RiskThresholds.parse("1,2,3").high == 3
