# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Settings of the report exporter, from `OTEL_EXPORTER_MCP_TOKENS_REPORT_*` variables.

A value that does not parse is logged (once, at start-up) and its default is used, as for the
instrumentation's own settings: a typo must never stop the host process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.exporter.mcp_tokens.env import integer_setting
from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.engine.hosts import parse_hosts

from .economics import Price
from .rows import RISK_ORDER

_logger = logging.getLogger(__name__)

PREFIX = "OTEL_EXPORTER_MCP_TOKENS_REPORT_"
PATH = PREFIX + "PATH"
TERMINAL = PREFIX + "TERMINAL"
FAIL_ON = PREFIX + "FAIL_ON"
FAIL_ON_PADDING = PREFIX + "FAIL_ON_PADDING"
FAIL_EXIT_CODE = PREFIX + "FAIL_EXIT_CODE"
MAX_ROWS = PREFIX + "MAX_ROWS"
PRICE_PER_MTOK = PREFIX + "PRICE_PER_MTOK"
CURRENCY = PREFIX + "CURRENCY"
HOST_CAP = PREFIX + "HOST_CAP"
FAIL_ON_HOST_CAP = PREFIX + "FAIL_ON_HOST_CAP"
# The hosts whose limits the report checks: the instrumentation's own setting, shared.
HOSTS = "OTEL_INSTRUMENTATION_MCP_TOKENS_HOSTS"

FORMATS = {".json": "json", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".txt": "text"}
DEFAULT_FAIL_EXIT_CODE = 1
DEFAULT_MAX_ROWS = 100
DEFAULT_CURRENCY = "USD"
MAX_CURRENCY_CHARS = 8
MAX_PATHS = 8
MAX_HOST_CAP = 100_000_000


@dataclass(frozen=True)
class ReportFile:
    path: Path
    format: str  # json, markdown, html, text


@dataclass(frozen=True)
class ReportSettings:
    files: tuple[ReportFile, ...] = ()
    terminal: bool = True
    fail_on: str | None = None
    fail_on_padding: bool = False
    fail_exit_code: int = DEFAULT_FAIL_EXIT_CODE
    max_rows: int = DEFAULT_MAX_ROWS
    price: Price | None = None
    host_cap: int = semconv.HOST_RESULT_CAP  # 0: not checked
    fail_on_host_cap: bool = False
    hosts: tuple[str, ...] = ()

    @property
    def gates(self) -> bool:
        return self.fail_on is not None or self.fail_on_padding or self.fail_on_host_cap

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, pid: int | None = None) -> ReportSettings:
        env = os.environ if environ is None else environ
        service = env.get("OTEL_SERVICE_NAME", "") or "unknown_service"
        return cls(
            files=_files(env.get(PATH, ""), pid if pid is not None else os.getpid(), service),
            terminal=_boolean(env, TERMINAL, True),
            fail_on=_tier(env.get(FAIL_ON, "")),
            fail_on_padding=_boolean(env, FAIL_ON_PADDING, False),
            fail_exit_code=integer_setting(env, FAIL_EXIT_CODE, DEFAULT_FAIL_EXIT_CODE, 1, 255),
            max_rows=integer_setting(env, MAX_ROWS, DEFAULT_MAX_ROWS, 1, 10_000),
            price=price_from(env.get(PRICE_PER_MTOK, ""), env.get(CURRENCY, ""), PRICE_PER_MTOK),
            host_cap=integer_setting(env, HOST_CAP, semconv.HOST_RESULT_CAP, 0, MAX_HOST_CAP),
            fail_on_host_cap=_boolean(env, FAIL_ON_HOST_CAP, False),
            hosts=_hosts(env.get(HOSTS, "")),
        )


def _files(text: str, pid: int, service: str) -> tuple[ReportFile, ...]:
    files = []
    for raw in (part.strip() for part in text.split(",")):
        if not raw:
            continue
        # {pid} and {service} keep the reports of several processes (a test suite and the
        # servers it starts inherit the same environment) apart.
        name = raw.replace("{pid}", str(pid)).replace("{service}", _safe(service))
        path = Path(name).expanduser()
        report_format = FORMATS.get(path.suffix.lower())
        if report_format is None:
            _logger.warning(
                "%s: %r has no known extension (%s); it is ignored", PATH, raw, ", ".join(sorted(FORMATS))
            )
            continue
        files.append(ReportFile(path, report_format))
    if len(files) > MAX_PATHS:
        _logger.warning("%s: only the first %d paths are written", PATH, MAX_PATHS)
    return tuple(files[:MAX_PATHS])


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64] or "unknown_service"


def _boolean(env: Mapping[str, str], name: str, default: bool) -> bool:
    text = env.get(name, "").strip().lower()
    if not text:
        return default
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    _logger.warning("%s=%r is not true or false; using %s", name, text, str(default).lower())
    return default


def _hosts(text: str) -> tuple[str, ...]:
    try:
        return parse_hosts(text.split(","))
    except ValueError as error:
        _logger.warning("%s=%r: %s; no host limits are checked", HOSTS, text, error)
        return ()


def _tier(text: str) -> str | None:
    value = text.strip().lower()
    if not value or value == "none":
        return None
    if value in RISK_ORDER:
        return value
    _logger.warning("%s=%r is not one of %s; the risk gate is off", FAIL_ON, text, ", ".join(RISK_ORDER))
    return None


def price_from(per_mtok: str, currency: str, source: str) -> Price | None:
    """A price from its text (unset: None), logged and ignored when it does not parse; `source`
    names the setting in the message. Also used by `mcp-tokens top`."""
    text = per_mtok.strip()
    if not text:
        return None
    try:
        return Price(float(text), parse_currency(currency))
    except ValueError:
        _logger.warning(
            "%s=%r is not a price (a number >= 0 per million input tokens); no cost shown", source, text
        )
        return None


def parse_currency(text: str) -> str:
    """A currency code or symbol as given, cut to MAX_CURRENCY_CHARS printable characters."""
    cleaned = "".join(c for c in text.strip() if c.isprintable())[:MAX_CURRENCY_CHARS]
    return cleaned or DEFAULT_CURRENCY
