# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Typed builders for classic Grafana dashboard JSON (schemaVersion 41).

Just enough of Grafana's dashboard model for the panels we ship: time series, stat,
bar gauge and heatmap panels fed by Prometheus, rows, template variables and dashboard
links. The builders own the conventions every panel must follow (the ``${datasource}``
reference, a unit, a description) so no panel can forget them, and they lay panels out
on the 24-column grid and number them, so ids are unique and stable by construction.

Schema version 41 is what Grafana 11.6 and 12.0/12.1 write (``@grafana/schema``
11.6.0/12.0.x default). Grafana migrates dashboards forward only, so 41 loads unchanged
in every Grafana from 11.6 to 13, which 42 would not promise for 11.6 and 12.0/12.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 41
GRID_COLUMNS = 24

JsonDict = dict[str, Any]

DATASOURCE_VARIABLE = "datasource"
PROMETHEUS_DATASOURCE: Mapping[str, str] = {"type": "prometheus", "uid": "${" + DATASOURCE_VARIABLE + "}"}


def _datasource() -> JsonDict:
    return dict(PROMETHEUS_DATASOURCE)


@dataclass(frozen=True)
class Target:
    """One PromQL query of a panel."""

    expr: str
    legend: str = "__auto"
    instant: bool = False
    format: str = "time_series"

    def to_json(self, ref_id: str) -> JsonDict:
        return {
            "datasource": _datasource(),
            "editorMode": "code",
            "expr": self.expr,
            "format": self.format,
            "instant": self.instant,
            "legendFormat": self.legend,
            "range": not self.instant,
            "refId": ref_id,
        }


@dataclass(frozen=True)
class Step:
    """A threshold step: from `value` upwards (None is the base step) use `color`."""

    value: float | None
    color: str

    def to_json(self) -> JsonDict:
        return {"color": self.color, "value": self.value}


@dataclass(frozen=True)
class SeriesColor:
    """Pin the colour of the series named `name` (e.g. a risk tier)."""

    name: str
    color: str

    def to_json(self) -> JsonDict:
        return {
            "matcher": {"id": "byName", "options": self.name},
            "properties": [{"id": "color", "value": {"fixedColor": self.color, "mode": "fixed"}}],
        }


@dataclass(frozen=True)
class DataLink:
    """A link on each data point, e.g. from a tool's bar to the tool drill-down."""

    title: str
    url: str

    def to_json(self) -> JsonDict:
        return {"targetBlank": False, "title": self.title, "url": self.url}


@dataclass(frozen=True)
class Panel:
    """A visualisation. `kind` is the Grafana panel plugin id."""

    title: str
    description: str
    kind: str
    unit: str
    targets: tuple[Target, ...]
    width: int = 12
    height: int = 8
    steps: tuple[Step, ...] = ()
    threshold_lines: bool = False
    stacked: bool = False
    minimum: float | None = None
    maximum: float | None = None
    colors: tuple[SeriesColor, ...] = ()
    links: tuple[DataLink, ...] = ()
    legend_calcs: tuple[str, ...] = ("mean", "max")
    y_axis_unit: str = ""

    def __post_init__(self) -> None:
        if not self.description.strip():
            raise ValueError(f"panel {self.title!r} needs a description")
        if not self.targets:
            raise ValueError(f"panel {self.title!r} needs at least one query")
        if not 1 <= self.width <= GRID_COLUMNS:
            raise ValueError(f"panel {self.title!r} width must be 1..{GRID_COLUMNS}, got {self.width}")

    def to_json(self, panel_id: int, x: int, y: int) -> JsonDict:
        defaults: JsonDict = {"unit": self.unit}
        if self.minimum is not None:
            defaults["min"] = self.minimum
        if self.maximum is not None:
            defaults["max"] = self.maximum
        base = Step(None, "green")
        steps = self.steps if self.steps and self.steps[0].value is None else (base, *self.steps)
        defaults["thresholds"] = {"mode": "absolute", "steps": [s.to_json() for s in steps]}
        defaults["color"] = {"mode": "thresholds" if self.kind in ("stat", "bargauge") else "palette-classic"}
        if self.links:
            defaults["links"] = [link.to_json() for link in self.links]
        if self.kind == "timeseries":
            defaults["custom"] = self._timeseries_custom()
        return {
            "datasource": _datasource(),
            "description": self.description,
            "fieldConfig": {"defaults": defaults, "overrides": [c.to_json() for c in self.colors]},
            "gridPos": {"h": self.height, "w": self.width, "x": x, "y": y},
            "id": panel_id,
            "options": self._options(),
            "targets": [t.to_json(_ref_id(i)) for i, t in enumerate(self.targets)],
            "title": self.title,
            "type": self.kind,
        }

    def _timeseries_custom(self) -> JsonDict:
        return {
            "drawStyle": "line",
            "fillOpacity": 25 if self.stacked else 10,
            "lineWidth": 1,
            "showPoints": "never",
            "spanNulls": False,
            "stacking": {"group": "A", "mode": "normal" if self.stacked else "none"},
            "thresholdsStyle": {"mode": "dashed" if self.threshold_lines else "off"},
        }

    def _options(self) -> JsonDict:
        reduce = {"calcs": ["lastNotNull"], "fields": "", "values": False}
        if self.kind == "timeseries":
            return {
                "legend": {
                    "calcs": list(self.legend_calcs),
                    "displayMode": "table",
                    "placement": "bottom",
                    "showLegend": True,
                },
                "tooltip": {"mode": "multi", "sort": "desc"},
            }
        if self.kind == "stat":
            return {
                "colorMode": "value",
                "graphMode": "area",
                "justifyMode": "auto",
                "orientation": "auto",
                "reduceOptions": reduce,
                "textMode": "auto",
            }
        if self.kind == "bargauge":
            return {
                "displayMode": "gradient",
                "minVizHeight": 16,
                "namePlacement": "auto",
                "orientation": "horizontal",
                "reduceOptions": {**reduce, "values": True},
                "showUnfilled": True,
                "valueMode": "color",
            }
        if self.kind == "heatmap":
            return {
                "calculate": False,
                "cellGap": 1,
                "color": {"mode": "scheme", "scale": "exponential", "exponent": 0.5, "scheme": "Oranges"},
                "legend": {"show": True},
                "rowsFrame": {"layout": "auto"},
                "tooltip": {"mode": "single", "showColorScale": False, "yHistogram": False},
                "yAxis": {"axisPlacement": "left", "unit": self.y_axis_unit or self.unit},
            }
        raise ValueError(f"unsupported panel kind {self.kind!r} for panel {self.title!r}")


def _ref_id(index: int) -> str:
    return chr(ord("A") + index)


@dataclass(frozen=True)
class Row:
    """A titled, expanded row of panels."""

    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Variable:
    """A template variable: the data source picker, a label query, or a fixed list."""

    name: str
    label: str
    kind: str
    query: str
    description: str
    multi: bool = True
    include_all: bool = True
    all_value: str = ".+"

    def to_json(self) -> JsonDict:
        variable: JsonDict = {
            "description": self.description,
            "hide": 0,
            "label": self.label,
            "name": self.name,
            "query": self.query,
            "skipUrlSync": False,
            "type": self.kind,
        }
        if self.kind == "datasource":
            variable.update({"options": [], "refresh": 1, "regex": ""})
            return variable
        if self.kind == "textbox":  # a free value with a default (e.g. a price)
            current = {"selected": False, "text": self.query, "value": self.query}
            variable.update({"current": current, "options": [{**current, "selected": True}]})
            return variable
        variable.update(
            {
                "includeAll": self.include_all,
                "multi": self.multi,
                "options": [],
            }
        )
        if self.include_all:
            variable["allValue"] = self.all_value
            variable["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
        if self.kind == "query":
            # 2 = on time range change: new servers and tools appear without a reload.
            variable.update({"datasource": _datasource(), "refresh": 2, "regex": "", "sort": 1})
        return variable


def datasource_variable() -> Variable:
    return Variable(
        name=DATASOURCE_VARIABLE,
        label="Data source",
        kind="datasource",
        query="prometheus",
        description="The Prometheus (or compatible) data source that scrapes the instrumented MCP processes.",
    )


def query_variable(
    name: str, label: str, metric: str, *, description: str, all_value: str = ".+"
) -> Variable:
    """A multi-select variable over the values of label `name` on series `metric`."""
    return Variable(
        name=name,
        label=label,
        kind="query",
        query=f"label_values({metric}, {name})",
        description=description,
        all_value=all_value,
    )


@dataclass(frozen=True)
class Dashboard:
    """A whole dashboard; `to_json` lays the rows out top to bottom."""

    uid: str
    title: str
    description: str
    tags: tuple[str, ...]
    variables: tuple[Variable, ...]
    rows: tuple[Row, ...]
    links_tag: str = ""
    extra_links: tuple[DataLink, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 8 <= len(self.uid) <= 40:
            raise ValueError(f"dashboard uid must be 8-40 characters, got {self.uid!r}")

    def panels(self) -> list[Panel]:
        return [panel for row in self.rows for panel in row.panels]

    def to_json(self) -> JsonDict:
        return {
            "annotations": {"list": [_builtin_annotation()]},
            "description": self.description,
            "editable": False,
            "fiscalYearStartMonth": 0,
            "graphTooltip": 1,
            "id": None,
            "links": self._links(),
            "panels": _layout(self.rows),
            "refresh": "1m",
            "schemaVersion": SCHEMA_VERSION,
            "tags": list(self.tags),
            "templating": {"list": [v.to_json() for v in self.variables]},
            "time": {"from": "now-6h", "to": "now"},
            "timepicker": {"refresh_intervals": ["30s", "1m", "5m", "15m", "1h"]},
            "timezone": "browser",
            "title": self.title,
            "uid": self.uid,
            "version": 1,
            "weekStart": "",
        }

    def _links(self) -> list[JsonDict]:
        if not self.links_tag:
            return []
        return [
            {
                "asDropdown": True,
                "icon": "external link",
                "includeVars": True,
                "keepTime": True,
                "tags": [self.links_tag],
                "targetBlank": False,
                "title": "MCP tokens dashboards",
                "tooltip": "",
                "type": "dashboards",
                "url": "",
            }
        ]


def _builtin_annotation() -> JsonDict:
    return {
        "builtIn": 1,
        "datasource": {"type": "grafana", "uid": "-- Grafana --"},
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }


def _layout(rows: Sequence[Row]) -> list[JsonDict]:
    """Row headers and panels, packed left to right, wrapping at the grid width."""
    out: list[JsonDict] = []
    next_id = 1
    y = 0
    for row in rows:
        out.append(
            {
                "collapsed": False,
                "gridPos": {"h": 1, "w": GRID_COLUMNS, "x": 0, "y": y},
                "id": next_id,
                "panels": [],
                "title": row.title,
                "type": "row",
            }
        )
        next_id += 1
        y += 1
        x = 0
        line_height = 0
        for panel in row.panels:
            if x + panel.width > GRID_COLUMNS:
                y += line_height
                x = 0
                line_height = 0
            out.append(panel.to_json(next_id, x, y))
            next_id += 1
            x += panel.width
            line_height = max(line_height, panel.height)
        y += line_height
    return out
