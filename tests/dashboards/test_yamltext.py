# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The YAML writer's output reads back (PyYAML) as exactly the data written."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.mcp_tokens.dashboards.yamltext import dump

from .conftest import DASHBOARDS

TRICKY_STRINGS = [
    "",
    " leading space",
    "trailing space ",
    "yes",
    "No",
    "null",
    "~",
    "123",
    "1e3",
    "0x1F",
    "10m",
    "2024-01-01",
    "key: value",
    "a #comment",
    "#start",
    "- dash",
    "[flow]",
    "{flow}",
    "it's",
    'say "hi"',
    '{{ $labels.job }} is {{ $value | printf "%.0f" }}',
    "$MCP_TOKENS_PROMETHEUS_DS_UID",
    "line1\nline2",
    "trailing newline\n",
    "tab\tinside",
    "line with trailing space \nnext",
    "\u00e9\u00e8 \u2014 \u4e2d\u6587",
    "bell\x07",
    'sum by (job) (rate(x{a="b"}[5m]))\n> 0',
    "dashboards/runbook.md#mcptoolresponsescritical",
    "https://git.example/a:b",
    "ends with colon:",
    "@at",
    "`backtick",
    "!tag",
    "&anchor",
    "*alias",
    "%percent",
    "|pipe",
    ">fold",
]


@pytest.mark.parametrize("text", TRICKY_STRINGS)
def test_tricky_strings_round_trip(text: str) -> None:
    document = {"value": text, "list": [text, {"nested": text}], text or "empty": 1}
    assert yaml.safe_load(dump(document)) == document


def test_scalars_and_empty_collections_round_trip() -> None:
    document: dict[str, Any] = {
        "int": 8000,
        "float": 0.25,
        "neg": -1,
        "true": True,
        "false": False,
        "none": None,
        "map": {},
        "seq": [],
    }
    assert yaml.safe_load(dump(document)) == document


def test_header_becomes_comments() -> None:
    text = dump({"a": 1}, "first\nsecond")
    assert text.startswith("# first\n# second\na: 1\n")


def test_rejects_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="non-finite"):
        dump({"x": float("nan")})
    with pytest.raises(TypeError, match="keys must be strings"):
        dump({1: "x"})
    with pytest.raises(TypeError, match="cannot write set"):
        dump({"x": {1, 2}})


_scalars = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
)
_documents = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _documents, max_size=5))
def test_any_document_round_trips(document: dict[str, Any]) -> None:
    assert yaml.safe_load(dump(document)) == document


@pytest.mark.parametrize(
    "relative",
    [
        "prometheus/alerts.yaml",
        "prometheus/rules.yaml",
        "grafana-alerting/mcp-tokens-alerts.yaml",
        "grafana-provisioning/dashboards.yaml",
        "alertmanager/alertmanager.example.yaml",
        "grafana-alerting/notification-policy.yaml.example",
    ],
)
def test_generated_files_are_valid_yaml(relative: str) -> None:
    assert isinstance(yaml.safe_load((DASHBOARDS / relative).read_text(encoding="utf-8")), dict)
