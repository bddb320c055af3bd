# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Dashboard lint rules in the spirit of grafana/dashboard-linter, for pytest.

dashboard-linter itself ships as a Go binary from GitHub only, so its rules (and the
monitoring-mixin conventions around them) are re-stated here over the dashboard JSON.
PromQL is checked textually; that every expression parses is promtool's job
(test_promtool.py). `lint(dashboard)` returns human-readable problems, empty when clean.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from opentelemetry.exporter.mcp_tokens.dashboards import names

DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
GRAFANA_BUILTIN_UID = "-- Grafana --"
SCHEMA_VERSION = 41
GRAFANA_GLOBALS = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
# Grafana's built-in unit ids that these dashboards may use (dashboard-linter's list is a superset).
VALID_UNITS = {"short", "none", "percent", "percentunit", "s", "ms", "reqps", "ops", "cps", "cpm"}
UNIT_PANELS = {"stat", "timeseries", "bargauge", "gauge", "table"}
JOB_MATCHER = 'job=~"$job"'

METRICS = {
    *(
        f"{n}_{suffix}"
        for n in (names.PAYLOAD, names.BUDGET_UTILIZATION)
        for suffix in ("bucket", "sum", "count")
    ),
    *(
        f"{n}_{suffix}"
        for n in (names.CLIENT_OPERATION_DURATION, names.SERVER_OPERATION_DURATION, names.ANALYSIS_DURATION)
        for suffix in ("bucket", "sum", "count")
    ),
    names.OVERHEAD_TOTAL,
    names.RESPONSES_TOTAL,
    names.TOOL_DEFINITION,
    names.BUDGET_CROSSINGS_TOTAL,
    names.PADDING_DETECTIONS_TOTAL,
    names.ANALYSIS_SKIPPED_TOTAL,
}
_METRIC_USE = re.compile(r"(?<![\w:])(" + "|".join(sorted(METRICS, key=len, reverse=True)) + r")(?![\w:])")
_RANGE = re.compile(r"\[([^\]]*)\]")
_VARIABLE_USE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def lint(dashboard: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    problems += _dashboard_rules(dashboard)
    problems += _variable_rules(dashboard)
    problems += _layout_rules(dashboard)
    problems += _datasource_everywhere(dashboard, "dashboard")
    for panel in panels(dashboard):
        if panel.get("type") == "row":
            continue
        problems += _panel_rules(panel)
        for target in panel.get("targets", []):
            problems += [
                f"panel {panel.get('title')!r}: {p}" for p in target_problems(target.get("expr", ""))
            ]
    problems += _variable_references(dashboard)
    return problems


def _dashboard_rules(d: dict[str, Any]) -> list[str]:
    problems = []
    if "__inputs" in d or "__requires" in d:
        problems.append("dashboard has __inputs/__requires: file provisioning cannot resolve them")
    for key in ("uid", "title"):
        if not d.get(key):
            problems.append(f"dashboard has no {key}")
    if not d.get("tags"):
        problems.append("dashboard has no tags")
    if d.get("schemaVersion") != SCHEMA_VERSION:
        problems.append(f"schemaVersion is {d.get('schemaVersion')!r}, expected {SCHEMA_VERSION}")
    if d.get("id") is not None:
        problems.append("dashboard id must be null: it is per Grafana instance")
    if d.get("editable") is not False:
        problems.append("provisioned dashboards should not be editable")
    return problems


def _variable_rules(d: dict[str, Any]) -> list[str]:
    variables = d.get("templating", {}).get("list", [])
    problems = []
    datasources = [v for v in variables if v.get("type") == "datasource"]
    if len(datasources) != 1:
        problems.append(f"expected one datasource variable, found {len(datasources)}")
    for v in datasources:
        if (v.get("name"), v.get("label"), v.get("query")) != ("datasource", "Data source", "prometheus"):
            problems.append(f"datasource variable must be datasource/'Data source'/prometheus, got {v}")
    job = next((v for v in variables if v.get("name") == "job"), None)
    if job is None:
        problems.append("no job variable")
    elif not (
        job.get("multi")
        and job.get("includeAll")
        and job.get("allValue") == ".+"
        and job.get("label") == "Job"
    ):
        problems.append("job variable must be multi-select, include All with allValue '.+', labelled 'Job'")
    for v in variables:
        if v.get("type") != "query":
            continue
        if v.get("datasource") != DATASOURCE_REF:
            problems.append(f"variable {v.get('name')!r} does not use the ${{datasource}} variable")
        if v.get("refresh") != 2:
            problems.append(f"variable {v.get('name')!r} must refresh on time range change (2)")
        if not str(v.get("query", "")).startswith("label_values("):
            problems.append(f"variable {v.get('name')!r} query is not label_values(...)")
    return problems


def _layout_rules(d: dict[str, Any]) -> list[str]:
    problems = []
    ids = [p.get("id") for p in panels(d)]
    duplicates = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    if duplicates:
        problems.append(f"duplicate panel ids {duplicates}")
    cells: dict[tuple[int, int], str] = {}
    for panel in panels(d):
        pos = panel.get("gridPos", {})
        x, y, w, h = (pos.get(k, -1) for k in ("x", "y", "w", "h"))
        if x < 0 or w <= 0 or h <= 0 or x + w > 24:
            problems.append(f"panel {panel.get('title')!r} gridPos {pos} is outside the 24-column grid")
            continue
        for cx in range(x, x + w):
            for cy in range(y, y + h):
                if (cx, cy) in cells:
                    problems.append(f"panel {panel.get('title')!r} overlaps {cells[(cx, cy)]!r}")
                    break
                cells[(cx, cy)] = panel.get("title", "")
            else:
                continue
            break
    return problems


def _datasource_everywhere(node: Any, where: str) -> list[str]:
    """Every datasource reference is the variable (or Grafana's built-in annotations)."""
    problems = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource" and isinstance(value, dict) and value.get("uid") != GRAFANA_BUILTIN_UID:
                if value != DATASOURCE_REF:
                    problems.append(f"{where}: hard-coded datasource {value}")
            elif key == "datasource" and isinstance(value, str):
                problems.append(f"{where}: datasource given by name {value!r}")
            else:
                problems += _datasource_everywhere(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            problems += _datasource_everywhere(item, f"{where}[{index}]")
    if isinstance(node, str) and "${DS_" in node:
        problems.append(f"{where}: uses an import-only ${{DS_...}} input")
    return problems


def _panel_rules(panel: dict[str, Any]) -> list[str]:
    title = panel.get("title")
    problems = []
    if not title:
        problems.append(f"panel {panel.get('id')} has no title")
    if not str(panel.get("description", "")).strip():
        problems.append(f"panel {title!r} has no description")
    if panel.get("datasource") != DATASOURCE_REF:
        problems.append(f"panel {title!r} does not use the ${{datasource}} variable")
    targets = panel.get("targets") or []
    if not targets:
        problems.append(f"panel {title!r} has no queries")
    for target in targets:
        if target.get("datasource") != DATASOURCE_REF:
            problems.append(f"panel {title!r} query {target.get('refId')} does not use ${{datasource}}")
        if not target.get("legendFormat"):
            problems.append(f"panel {title!r} query {target.get('refId')} has no legend")
    unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit")
    if panel.get("type") in UNIT_PANELS and unit not in VALID_UNITS:
        problems.append(f"panel {title!r} has no or an invalid unit: {unit!r}")
    return problems


def target_problems(expr: str) -> list[str]:
    """PromQL rules for one dashboard query."""
    problems = []
    if not expr.strip():
        return ["empty query"]
    for match in _RANGE.finditer(expr):
        if not match.group(1).startswith("$__"):
            problems.append(f"range [{match.group(1)}] is fixed; use $__rate_interval (or $__range): {expr}")
        before = expr[: match.start()]
        if re.search(r"(?<![\w])i?rate\([^()]*$", before) and match.group(1) != "$__rate_interval":
            problems.append(f"rate() must use [$__rate_interval]: {expr}")
    for use in _METRIC_USE.finditer(expr):
        metric = use.group(1)
        rest = expr[use.end() :]
        selector = re.match(r"\{([^}]*)\}", rest)
        if selector is None or JOB_MATCHER not in selector.group(1):
            problems.append(f"{metric} has no {JOB_MATCHER} matcher: {expr}")
        if metric.endswith("_total"):
            wrapped = re.search(r"(?<![\w])(rate|irate|increase)\($", expr[: use.start()])
            after = rest[selector.end() :] if selector else rest
            if wrapped is None or not after.startswith("["):
                problems.append(f"counter {metric} is used outside rate()/increase(): {expr}")
    return problems


def _variable_references(d: dict[str, Any]) -> list[str]:
    defined = {v.get("name") for v in d.get("templating", {}).get("list", [])}
    used: set[str] = set()
    problems = []
    texts = [str(v.get("query", "")) for v in d.get("templating", {}).get("list", [])]
    texts += [t.get("expr", "") for p in panels(d) for t in p.get("targets", [])]
    texts += [str(p.get("title", "")) for p in panels(d)]  # e.g. a currency shown in a cost panel's title
    for text in texts:
        for match in _VARIABLE_USE.finditer(text):
            name = match.group(1) or match.group(2)
            used.add(name)
            if name not in defined and name not in GRAFANA_GLOBALS:
                problems.append(f"query uses undefined variable ${name}: {text}")
    used.add("datasource")  # used by reference in every panel's datasource
    for name in sorted(defined - used, key=str):
        problems.append(f"variable {name!r} is defined but never used")
    return problems
