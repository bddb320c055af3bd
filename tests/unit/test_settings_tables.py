# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The settings tables of README.md, docs/telemetry.md and the instrumentor's docstring are
what config.py declares (`make docs` writes them: tests/settings_tables.py)."""

from __future__ import annotations

import pytest
from opentelemetry.instrumentation import mcp_tokens
from opentelemetry.instrumentation.mcp_tokens.config import (
    UNSET,
    SettingDoc,
    Settings,
    documented_settings,
    parse_setting,
)

from tests import settings_tables


def test_the_committed_tables_are_generated_from_config() -> None:
    assert settings_tables.stale() == [], "run `make docs`"


def test_a_setting_added_to_config_without_its_rows_fails_the_check() -> None:
    added = SettingDoc("hosts", "OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS", UNSET, "the hosts", in_readme=True)
    assert settings_tables.stale(settings=(*documented_settings(), added)) == [
        section.path for section in settings_tables.SECTIONS
    ]


def test_every_field_of_settings_is_documented_once() -> None:
    names = [setting.name for setting in documented_settings()]
    assert names == list(Settings._fields)


def test_the_docstring_python_reads_names_every_variable_with_its_default() -> None:
    docstring = mcp_tokens.__doc__ or ""
    for setting in documented_settings():
        default = "unset by default" if setting.default == UNSET else f"default ``{setting.default}``"
        assert f"``{setting.variable}`` ({default})" in docstring


def test_the_readme_shows_the_settings_declared_for_it() -> None:
    table = settings_tables.readme_table(documented_settings())
    shown = [setting for setting in documented_settings() if setting.in_readme]
    assert shown, "the README names at least the most common settings"
    assert len(table.splitlines()) == 2 + len(shown)
    assert "`..._GUARD`" in table and "`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`" in table


@pytest.mark.parametrize("setting", documented_settings(), ids=lambda setting: setting.name)
def test_the_default_a_table_shows_parses_to_the_default(setting: SettingDoc) -> None:
    default = getattr(Settings(), setting.name)
    if setting.default == UNSET:
        assert default in (None, ())
    else:
        assert parse_setting(setting.name, setting.default) == default
