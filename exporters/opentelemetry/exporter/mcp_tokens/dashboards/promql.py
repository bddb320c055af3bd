# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Small PromQL string builders shared by the dashboards and the rules.

Every aggregation names the labels it keeps (``sum by (...)``), which drops the
``instance`` and ``otel_scope_*`` labels the Prometheus exporter adds: a version bump of
the instrumentation then continues a series instead of splitting it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import names

RATE_INTERVAL = "$__rate_interval"
RANGE = "$__range"


def eq(label: str, value: str) -> str:
    return f'{label}="{value}"'


def matches(label: str, pattern: str) -> str:
    return f'{label}=~"{pattern}"'


def variable(label: str) -> str:
    """A regex matcher on the dashboard variable named after `label`."""
    return matches(label, "$" + label)


def series(metric: str, matchers: Iterable[str] = ()) -> str:
    inside = ", ".join(matchers)
    return f"{metric}{{{inside}}}" if inside else metric


def labels(keep: Sequence[str]) -> str:
    return ", ".join(keep)


def sum_by(keep: Sequence[str], inner: str) -> str:
    return f"sum by ({labels(keep)}) ({inner})"


def rate(selector: str, window: str) -> str:
    return f"rate({selector}[{window}])"


def increase(selector: str, window: str) -> str:
    return f"increase({selector}[{window}])"


def quantile(q: float, keep: Sequence[str], bucket_selector: str, window: str, *, over: str = "rate") -> str:
    """`q` quantile of a classic histogram per `keep`, over `window`."""
    inner = rate(bucket_selector, window) if over == "rate" else increase(bucket_selector, window)
    return f"histogram_quantile({q}, {sum_by([*keep, names.LE], inner)})"


def events(metric: str, matchers: Sequence[str], keep: Sequence[str], window: str) -> str:
    """How many times counter `metric` went up in `window`, counting brand-new series.

    A counter appears in the exposition only once it is first incremented, so its first
    sample is already 1 and `increase()` (which needs two samples) reports 0 for it: the
    first padding finding or budget crossing of a process would never alert. A series
    that did not exist `window` ago is counted with its whole value instead.
    """
    selector = series(metric, matchers)
    fresh = sum_by(keep, f"{selector} unless {selector} offset {window}")
    grown = sum_by(keep, increase(selector, window))
    return f"({fresh} or {grown})"


def number(value: float) -> str:
    """A threshold as PromQL and people write it: 8000, not 8000.0."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))
