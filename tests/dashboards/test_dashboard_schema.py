# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Every dashboard validates against Grafana's dashboard model (fixtures/README.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from .conftest import DASHBOARDS

SCHEMA_PATH = Path(__file__).parent / "fixtures" / "grafana-dashboard.schema.json"
DASHBOARD_FILES = sorted((DASHBOARDS / "grafana").glob("*.json"))


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def _errors(validator: jsonschema.Draft7Validator, dashboard: dict[str, Any]) -> list[str]:
    return [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(dashboard)]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_dashboard_matches_grafana_schema(validator: jsonschema.Draft7Validator, path: Path) -> None:
    assert _errors(validator, json.loads(path.read_text(encoding="utf-8"))) == []


def _overview() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (DASHBOARDS / "grafana" / "mcp-tokens-overview.json").read_text("utf-8")
    )
    return data


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: d.update(schemaVersion="41"), id="string-schemaVersion"),
        pytest.param(lambda d: d["panels"][1]["gridPos"].update(h="8"), id="string-gridPos-h"),
        pytest.param(lambda d: d["panels"][1].update(legend={"show": True}), id="unknown-panel-key"),
        pytest.param(
            lambda d: d["panels"][1]["fieldConfig"]["defaults"].update(units="short"), id="misspelt-unit"
        ),
        pytest.param(
            lambda d: d["templating"]["list"][1].update(type="dropdown"), id="unknown-variable-type"
        ),
        pytest.param(lambda d: d.pop("schemaVersion"), id="missing-schemaVersion"),
    ],
)
def test_schema_rejects_broken_dashboards(validator: jsonschema.Draft7Validator, mutate: Any) -> None:
    dashboard = copy.deepcopy(_overview())
    mutate(dashboard)
    assert _errors(validator, dashboard)
