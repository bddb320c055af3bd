# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`McpTokensReportExporter`: keeps the run's mcp-tokens metrics and writes the report at shutdown.

    opentelemetry-instrument --metrics_exporter mcp_tokens_report python my_server.py
    opentelemetry-instrument --metrics_exporter prometheus,mcp_tokens_report pytest tests/

The SDK's configurator wraps it in a `PeriodicExportingMetricReader`; when the meter
provider shuts down at exit, the reader collects one last time and then shuts the exporter
down, which is when the report is built and written (stderr, never stdout: a stdio MCP
server's stdout is its protocol channel). Nothing here ever raises into the host: every
failure is logged and swallowed.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timezone
from typing import Any

from opentelemetry.sdk.metrics import (
    Counter,
    Histogram,
    ObservableCounter,
    ObservableGauge,
    ObservableUpDownCounter,
    UpDownCounter,
    _Gauge,
)
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.metrics.view import Aggregation

from .exit_status import GATE, ExitGate
from .model import Report, build_report
from .output import write_report
from .settings import ReportSettings
from .state import MetricState

_logger = logging.getLogger(__name__)

# The report is the run's total: every instrument cumulative (a delta point is still added up).
_INSTRUMENTS = (
    Counter,
    UpDownCounter,
    Histogram,
    _Gauge,
    ObservableCounter,
    ObservableUpDownCounter,
    ObservableGauge,
)
CUMULATIVE: dict[type, AggregationTemporality] = dict.fromkeys(
    _INSTRUMENTS, AggregationTemporality.CUMULATIVE
)


class McpTokensReportExporter(MetricExporter):
    """A metric exporter whose output is one report, written when it shuts down."""

    def __init__(
        self,
        settings: ReportSettings | None = None,
        preferred_temporality: dict[type, AggregationTemporality] | None = None,
        preferred_aggregation: dict[type, Aggregation] | None = None,
        gate: ExitGate | None = None,
    ) -> None:
        super().__init__(
            preferred_temporality={**CUMULATIVE, **(preferred_temporality or {})},
            preferred_aggregation=preferred_aggregation,
        )
        self._settings = settings if settings is not None else _settings_from_env()
        self._state = MetricState()
        self._gate = gate if gate is not None else GATE
        self._lock = threading.Lock()
        self._report: Report | None = None
        self._export_failed = False
        # A meter provider that is never shut down (shutdown_on_exit=False) still gets a report
        # at exit, from the last export.
        self._gate.before_exit(self._finish_at_exit)

    @property
    def settings(self) -> ReportSettings:
        return self._settings

    @property
    def report(self) -> Report | None:
        """The report, once written (None before shutdown)."""
        return self._report

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            self._state.update(metrics_data)
        except Exception:
            if not self._export_failed:  # once: this runs every export interval
                self._export_failed = True
                _logger.warning("mcp-tokens report: could not read the metrics", exc_info=True)
            return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.finish()

    def finish(self) -> Report | None:
        """Build and write the report once; apply its verdict to the exit status."""
        with self._lock:
            if self._report is not None:
                return self._report
            try:
                self._report = self._build()
                write_report(self._report, self._settings)
                self._apply_verdict(self._report)
            except Exception:
                _logger.warning("mcp-tokens report: could not produce the report", exc_info=True)
            return self._report

    def _finish_at_exit(self) -> None:
        self.finish()

    def _build(self) -> Report:
        settings = self._settings
        return build_report(
            self._state.snapshot(),
            generated_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            fail_on=settings.fail_on,
            fail_on_padding=settings.fail_on_padding,
            fail_exit_code=settings.fail_exit_code,
            price=settings.price,
            host_cap_tokens=settings.host_cap or None,
            fail_on_host_cap=settings.fail_on_host_cap and settings.host_cap > 0,
            hosts=settings.hosts,
        )

    def _apply_verdict(self, report: Report) -> None:
        verdict = report.verdict
        if verdict.passed:
            return
        self._gate.fail(verdict.exit_code)
        if not self._settings.terminal:  # the terminal report says it otherwise
            _logger.error(
                "mcp-tokens report: gate failed (%d finding(s)); exiting with %d",
                len(verdict.failures),
                verdict.exit_code,
            )


def _settings_from_env() -> ReportSettings:
    try:
        return ReportSettings.from_env()
    except Exception:
        _logger.warning("mcp-tokens report: bad settings; using the defaults", exc_info=True)
        return ReportSettings()
