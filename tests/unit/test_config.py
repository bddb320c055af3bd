# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Settings: environment, keyword overrides, and bad values that must not stop the host."""

from __future__ import annotations

import logging
import re

import pytest
from opentelemetry.instrumentation.mcp_tokens.config import Settings, env_variable
from opentelemetry.instrumentation.mcp_tokens.engine.images import ImageModel
from opentelemetry.instrumentation.mcp_tokens.engine.ledger import BudgetThresholds
from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds, RiskTier


def test_defaults_match_the_documented_contract() -> None:
    settings = Settings.load(environ={})
    assert settings.encoding == "o200k_base"
    assert settings.max_bytes == 32 * 1024 * 1024
    assert settings.image_model is ImageModel.ANTHROPIC
    assert settings.risk_thresholds == RiskThresholds(1000, 4000, 8000)
    assert settings.budget_thresholds == BudgetThresholds(0.75, 0.90)
    assert settings.context_window == 200_000
    assert settings.max_label_values == 200
    assert settings.capture_content is False
    assert settings.overhead_pattern is None


def test_environment_variables_are_read() -> None:
    environ = {
        "OTEL_INSTRUMENTATION_MCP_TOKENS_ENCODING": "cl100k_base",
        "OTEL_INSTRUMENTATION_MCP_TOKENS_RISK_THRESHOLDS": "500, 2000, 5000",
        "OTEL_INSTRUMENTATION_MCP_TOKENS_OVERHEAD_PATTERN": r"^<rules>",
        "OTEL_INSTRUMENTATION_MCP_TOKENS_IMAGE_MODEL": "OpenAI",
        "OTEL_INSTRUMENTATION_MCP_TOKENS_CONTEXT_WINDOW": "128000",
        "OTEL_INSTRUMENTATION_MCP_TOKENS_BUDGET_THRESHOLDS": "0.5,0.8",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    settings = Settings.load(environ=environ)
    assert settings.encoding == "cl100k_base"
    assert settings.risk_thresholds.classify(2001) is RiskTier.HIGH
    assert settings.overhead_pattern is not None and settings.overhead_pattern.pattern == "^<rules>"
    assert settings.image_model is ImageModel.OPENAI
    assert settings.context_window == 128_000
    assert settings.budget_thresholds == BudgetThresholds(0.5, 0.8)
    assert settings.capture_content is True


def test_keyword_overrides_win_over_the_environment() -> None:
    environ = {"OTEL_INSTRUMENTATION_MCP_TOKENS_CONTEXT_WINDOW": "128000"}
    settings = Settings.load({"context_window": 32_000, "overhead_pattern": "^x", "padding": False}, environ)
    assert settings.context_window == 32_000
    assert settings.overhead_pattern == re.compile("^x")
    assert settings.padding is False


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("max_bytes", "lots"),
        ("max_bytes", "-5"),
        ("risk_thresholds", "8000,4000,1000"),
        ("risk_thresholds", "1,2"),
        ("budget_thresholds", "0.9,0.75"),
        ("overhead_pattern", "(unclosed"),
        ("image_model", "dall-e"),
        ("capture_content", "maybe"),
    ],
)
def test_bad_values_are_logged_once_and_the_default_kept(
    name: str, raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    variable = env_variable(name)
    with caplog.at_level(logging.WARNING):
        settings = Settings.load(environ={variable: raw})
    assert getattr(settings, name) == getattr(Settings(), name)
    assert [r for r in caplog.records if variable in r.getMessage()], "the warning names the variable"


def test_unknown_keyword_is_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        settings = Settings.load({"no_such_setting": 1}, environ={})
    assert settings == Settings()
    assert "no_such_setting" in caplog.text


def test_risk_thresholds_parse_and_classify_at_the_boundaries() -> None:
    thresholds = RiskThresholds.parse("1000,4000,8000")
    assert [thresholds.classify(t) for t in (0, 1000, 1001, 4000, 4001, 8000, 8001)] == [
        RiskTier.LOW,
        RiskTier.LOW,
        RiskTier.MEDIUM,
        RiskTier.MEDIUM,
        RiskTier.HIGH,
        RiskTier.HIGH,
        RiskTier.CRITICAL,
    ]
    with pytest.raises(ValueError, match="'a,b,c'"):
        RiskThresholds.parse("a,b,c")
