"""Every OTEL_INSTRUMENTATION_MCP_TOKENS_* setting, parsed once, with its default.

`Settings.load(overrides)` reads the environment; keyword arguments given to
`McpTokensInstrumentor().instrument(...)` override it by field name. A value that does
not parse is logged once, naming the variable, and the default is used: configuration
mistakes must never stop the host application.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .engine.images import ImageModel
from .engine.ledger import BudgetThresholds
from .engine.risk import RiskThresholds

_logger = logging.getLogger(__name__)

PREFIX = "OTEL_INSTRUMENTATION_MCP_TOKENS_"
# Where the analysis runs (ANALYSIS): a helper process (default), or a thread of the
# application (where child processes are unwelcome; the analysis then shares the GIL).
ANALYSIS_PROCESS = "process"
ANALYSIS_THREAD = "thread"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


@dataclass(frozen=True)
class Settings:
    encoding: str = "o200k_base"
    tokenizer_file: str | None = None
    tokenizer_pattern: str | None = None
    max_bytes: int = 32 * 1024 * 1024
    image_model: ImageModel = ImageModel.ANTHROPIC
    risk_thresholds: RiskThresholds = field(default_factory=RiskThresholds)
    overhead_pattern: re.Pattern[str] | None = None
    padding: bool = True
    context_window: int = 200_000
    budget_thresholds: BudgetThresholds = field(default_factory=BudgetThresholds)
    max_scopes: int = 10_000
    scope_idle_ttl: float = 3600.0
    queue_size: int = 1024
    max_label_values: int = 200
    capture_content: bool = False
    content_max_chars: int = 4096
    analysis: str = ANALYSIS_PROCESS

    @classmethod
    def load(
        cls, overrides: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
    ) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for setting in dataclasses.fields(cls):
            variable = env_variable(setting.name)
            raw = env.get(variable)
            if raw is None or raw.strip() == "":
                continue
            parsed = _parse(setting.name, variable, raw)
            if parsed is not _INVALID:
                values[setting.name] = parsed
        for name, value in (overrides or {}).items():
            if name not in _PARSERS:
                _logger.warning("mcp-tokens: unknown setting %r ignored", name)
                continue
            parsed = _parse(name, name, value) if isinstance(value, str) else value
            if parsed is not _INVALID:
                values[name] = parsed
        return cls(**values)


def env_variable(name: str) -> str:
    """The environment variable of a setting (content capture uses the GenAI-wide one)."""
    return CAPTURE_CONTENT_ENV if name == "capture_content" else PREFIX + name.upper()


_INVALID = object()


def _positive_int(text: str) -> int:
    value = int(text.strip())
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def _positive_float(text: str) -> float:
    value = float(text.strip())
    if not value > 0:
        raise ValueError("must be a positive number")
    return value


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise ValueError("must be true or false")


def _text(text: str) -> str:
    return text.strip()


def _analysis_mode(text: str) -> str:
    mode = text.strip().lower()
    if mode not in (ANALYSIS_PROCESS, ANALYSIS_THREAD):
        raise ValueError(f"must be {ANALYSIS_PROCESS} or {ANALYSIS_THREAD}")
    return mode


_PARSERS: dict[str, Callable[[str], Any]] = {
    "encoding": _text,
    "tokenizer_file": _text,
    "tokenizer_pattern": _text,
    "max_bytes": _positive_int,
    "image_model": lambda text: ImageModel(text.strip().lower()),
    "risk_thresholds": RiskThresholds.parse,
    "overhead_pattern": re.compile,
    "padding": _boolean,
    "context_window": _positive_int,
    "budget_thresholds": BudgetThresholds.parse,
    "max_scopes": _positive_int,
    "scope_idle_ttl": _positive_float,
    "queue_size": _positive_int,
    "max_label_values": _positive_int,
    "capture_content": _boolean,
    "content_max_chars": _positive_int,
    "analysis": _analysis_mode,
}


def _parse(name: str, source: str, raw: str) -> Any:
    try:
        return _PARSERS[name](raw)
    except (ValueError, re.error) as exc:
        _logger.warning("mcp-tokens: ignoring %s=%r (%s); using the default", source, raw, exc)
        return _INVALID
