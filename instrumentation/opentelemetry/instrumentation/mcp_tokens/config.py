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

from . import semconv
from .engine.images import ImageModel
from .engine.ledger import BudgetThresholds
from .engine.risk import RiskThresholds

_logger = logging.getLogger(__name__)

PREFIX = "OTEL_INSTRUMENTATION_MCP_TOKENS_"
# Where the analysis runs (ANALYSIS): the user's counting service, a process shared by every
# instrumented process of the user (default), or a thread of the application (where child
# processes are unwelcome; the analysis then shares the GIL).
ANALYSIS_PROCESS = "process"
ANALYSIS_THREAD = "thread"
CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# What the guard does to a result over its limit (GUARD), and to one that would take its
# budget scope past the context window (GUARD_BUDGET); see guard/.
GUARD_OFF = "off"
GUARD_WARN = "warn"
GUARD_TRUNCATE = "truncate"
GUARD_REJECT = "reject"
GUARD_MODES = (GUARD_OFF, GUARD_WARN, GUARD_TRUNCATE, GUARD_REJECT)
GUARD_BUDGET_MODES = (GUARD_OFF, GUARD_TRUNCATE, GUARD_REJECT)


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
    # How long after its call a span may wait for its exact count before it ends with an
    # estimate (the exact count still reaches the metrics).
    span_wait: float = 1.0
    max_label_values: int = 200
    capture_content: bool = False
    content_max_chars: int = 4096
    analysis: str = ANALYSIS_PROCESS
    # The counting service (counting/): where its sockets live (default: the user's runtime
    # directory), its counting processes (0: one per two cores, at most four), and how long
    # it stays once its last client has gone.
    counter_dir: str | None = None
    counter_processes: int = 0
    counter_idle_timeout: float = 300.0
    guard: str = GUARD_OFF
    guard_max_result_tokens: int = semconv.HOST_RESULT_CAP
    # (tool name, limit) pairs; a limit of 0 lifts the limit for that tool.
    guard_tool_limits: tuple[tuple[str, int], ...] = ()
    guard_budget: str = GUARD_OFF
    guard_repeat_limit: int = 0
    guard_repeat_window: float = 60.0
    guard_notice: str | None = None

    @property
    def counting_processes(self) -> int:
        if self.counter_processes > 0:
            return self.counter_processes
        return max(1, min(4, (os.cpu_count() or 1) // 2))

    @property
    def guard_enabled(self) -> bool:
        """Whether any guard acts on results (everything guard-related is skipped otherwise)."""
        return self.guard != GUARD_OFF or self.guard_budget != GUARD_OFF

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
            parsed = _parse(name, name, value) if isinstance(value, str) else _coerce(name, value)
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


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError("must be one of " + ", ".join(choices))
        return value

    return parse


def _non_negative_int(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError("must be a non-negative integer")
    return value


def _tool_limits(text: str) -> tuple[tuple[str, int], ...]:
    """`name=tokens,name=tokens` (0: no limit for that tool)."""
    limits: dict[str, int] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        name, separator, value = entry.rpartition("=")
        if not separator or not name.strip():
            raise ValueError(f"{entry.strip()!r} is not name=tokens")
        limits[name.strip()] = _non_negative_int(value)
    return tuple(limits.items())


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
    "span_wait": _positive_float,
    "max_label_values": _positive_int,
    "capture_content": _boolean,
    "content_max_chars": _positive_int,
    "analysis": _analysis_mode,
    "counter_dir": _text,
    "counter_processes": _non_negative_int,
    "counter_idle_timeout": _positive_float,
    "guard": _choice(GUARD_MODES),
    "guard_max_result_tokens": _positive_int,
    "guard_tool_limits": _tool_limits,
    "guard_budget": _choice(GUARD_BUDGET_MODES),
    "guard_repeat_limit": _non_negative_int,
    "guard_repeat_window": _positive_float,
    "guard_notice": _text,
}


def _coerce(name: str, value: Any) -> Any:
    """A keyword given as a Python value: `guard_tool_limits` may be a mapping."""
    if name == "guard_tool_limits" and isinstance(value, Mapping):
        try:
            return tuple((str(tool), _non_negative_int(str(limit))) for tool, limit in value.items())
        except ValueError as exc:
            _logger.warning("mcp-tokens: ignoring guard_tool_limits=%r (%s); using the default", value, exc)
            return _INVALID
    return value


def _parse(name: str, source: str, raw: str) -> Any:
    try:
        return _PARSERS[name](raw)
    except (ValueError, re.error) as exc:
        _logger.warning("mcp-tokens: ignoring %s=%r (%s); using the default", source, raw, exc)
        return _INVALID
