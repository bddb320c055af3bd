# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Every OTEL_INSTRUMENTATION_MCP_TOKENS_* setting, parsed once, with its default.

`Settings.load(overrides)` reads the environment; keyword arguments given to
`McpTokensInstrumentor().instrument(...)` override it by field name. A value that does
not parse is logged once, naming the variable, and the default is used: configuration
mistakes must never stop the host application.

A setting is one field of `Settings`, declared with `setting(default, parse, meaning)`:
its environment variable is the prefix plus the field's name in upper case, its keyword
the field's name, and the same declaration is its row in the settings tables of README.md,
docs/telemetry.md and the instrumentor's docstring (`make docs` writes them; a test fails
while they differ). Adding a setting is adding a field.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, NamedTuple

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
# How the tables show a setting without a default value.
UNSET = "unset"


# --- parsers: text of an environment variable -> value; ValueError names what is wrong -----
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


def _non_negative_int(text: str) -> int:
    value = int(text.strip())
    if value < 0:
        raise ValueError("must be a non-negative integer")
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


def _image_model(text: str) -> ImageModel:
    return ImageModel(text.strip().lower())


def _choice(choices: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in choices:
            raise ValueError("must be one of " + ", ".join(choices))
        return value

    return parse


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


def _hosts(text: str) -> tuple[str, ...]:
    """`claude-code,codex` (names from engine/hosts.py)."""
    return _parse_hosts(text.split(","))


def _parse_hosts(names: Iterable[str]) -> tuple[str, ...]:
    # The hosts' table is read only when a process names hosts: most never do, and
    # building it is a noticeable part of instrument()'s start-up.
    from .engine.hosts import parse_hosts  # noqa: PLC0415

    return parse_hosts(names)


class Settings(NamedTuple):
    """Every setting, with its default. What each means and how its environment value parses
    is in `_DOCS` below, in the same order (a test holds them together)."""

    encoding: str = "o200k_base"
    tokenizer_file: str | None = None
    tokenizer_pattern: str | None = None
    max_bytes: int = 32 * 1024 * 1024
    image_model: ImageModel = ImageModel.ANTHROPIC
    risk_thresholds: RiskThresholds = RiskThresholds()
    overhead_pattern: re.Pattern[str] | None = None
    padding: bool = True
    context_window: int = 200_000
    budget_thresholds: BudgetThresholds = BudgetThresholds()
    max_scopes: int = 10_000
    scope_idle_ttl: float = 3600.0
    queue_size: int = 1024
    span_wait: float = 1.0
    max_label_values: int = 200
    capture_content: bool = False
    content_max_chars: int = 4096
    analysis: str = ANALYSIS_PROCESS
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
    # Checked off the response path, in each host's own unit (Claude tokens for claude-code,
    # bytes and lines for codex...); the tool count of each listing is recorded anyway.
    hosts: tuple[str, ...] = ()

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
        for name in Settings._fields:
            variable = env_variable(name)
            raw = env.get(variable)
            if raw is None or raw.strip() == "":
                continue
            parsed = _parse(name, variable, raw)
            if parsed is not _INVALID:
                values[name] = parsed
        for name, value in (overrides or {}).items():
            if name not in _DOCS:
                _logger.warning("mcp-tokens: unknown setting %r ignored", name)
                continue
            parsed = _parse(name, name, value) if isinstance(value, str) else _coerce(name, value)
            if parsed is not _INVALID:
                values[name] = parsed
        return cls(**values)


class _Doc(NamedTuple):
    """How a setting's environment value parses and what it means, as the settings tables say
    it. `shown` is the default as a user would write it, where the value's own text is not
    that; `readme` puts it in the README's short table."""

    parse: Callable[[str], Any]
    meaning: str
    shown: str | None = None
    readme: bool = False


_DOCS: dict[str, _Doc] = {
    "encoding": _Doc(
        _text,
        "`o200k_base` or `cl100k_base` (bundled, offline); `claude-<version>` (`claude-3`, `claude-4.7`; "
        "`claude`: the latest) counts Claude's tokens, exact with the `claude` extra, else estimated; "
        "with `TOKENIZER_FILE`, the name reported as `mcp_tokens.encoding`",
        readme=True,
    ),
    "tokenizer_file": _Doc(
        _text,
        "a tiktoken BPE file (`base64 rank` lines) or a HuggingFace `tokenizer.json` "
        "(needs the `tokenizers` package, extra `huggingface`)",
        readme=True,
    ),
    "tokenizer_pattern": _Doc(
        _text,
        "for a tiktoken BPE file: the family whose split pattern and special tokens to use "
        "(`o200k`, `cl100k`, `llama3`)",
    ),
    "max_bytes": _Doc(
        _positive_int,
        "payloads above this many UTF-8 bytes are estimated (flagged `exact=false`)",
    ),
    "image_model": _Doc(
        _image_model,
        "image token formula: `anthropic`, `openai`, `gemini`",
    ),
    "risk_thresholds": _Doc(
        RiskThresholds.parse,
        "upper bounds of the low, medium and high tiers",
        shown="1000,4000,8000",
        readme=True,
    ),
    "overhead_pattern": _Doc(
        re.compile,
        "a Python regex marking overhead blocks (searched in each block's first 64 KiB)",
    ),
    "padding": _Doc(
        _boolean,
        "run the padding detectors",
    ),
    "context_window": _Doc(
        _positive_int,
        "the context window of a budget scope, in tokens",
        readme=True,
    ),
    "budget_thresholds": _Doc(
        BudgetThresholds.parse,
        "utilisation at which a scope reaches `warning` and `critical`",
        shown="0.75,0.90",
    ),
    "max_scopes": _Doc(
        _positive_int,
        "budget scopes kept (least recently used are dropped)",
    ),
    "scope_idle_ttl": _Doc(
        _positive_float,
        "seconds after which an idle scope is dropped",
    ),
    "queue_size": _Doc(
        _positive_int,
        "exchanges held for counting (queued, or at the counter); beyond it they are estimated from "
        "their length (`overload`)",
    ),
    "span_wait": _Doc(
        _positive_float,
        "seconds after its call a span may wait for its exact count before it ends with an estimate "
        "(`mcp_tokens.skipped=late`; the exact count still reaches the metrics)",
    ),
    "max_label_values": _Doc(
        _positive_int,
        "distinct tool and prompt names per server before `_OTHER`",
        readme=True,
    ),
    "capture_content": _Doc(
        _boolean,
        "record tool arguments and results on spans",
        readme=True,
    ),
    "content_max_chars": _Doc(
        _positive_int,
        "truncation of captured content, in characters",
    ),
    "analysis": _Doc(
        _choice((ANALYSIS_PROCESS, ANALYSIS_THREAD)),
        "where the analysis runs: `process` (the user's counting service, shared by every "
        "instrumented process of the user) or `thread` (a thread of the application, sharing its GIL)",
        readme=True,
    ),
    "counter_dir": _Doc(
        _text,
        "the directory of the counting service's sockets (unset: `$XDG_RUNTIME_DIR/mcp-tokens`, else "
        "`mcp-tokens-<uid>` in the temporary directory), created if missing and used only if it is the "
        "user's and no one else can open it",
    ),
    "counter_processes": _Doc(
        _non_negative_int,
        "the counting service's counting processes (0: one per two cores, at most four)",
    ),
    "counter_idle_timeout": _Doc(
        _positive_float,
        "seconds a counting process, and then the counting service, stays once its last client has gone",
    ),
    "guard": _Doc(
        _choice(GUARD_MODES),
        "`off`, `warn`, `truncate` or `reject`: what happens to a tool result or resource read "
        "over its limit (docs/guardrails.md)",
        readme=True,
    ),
    "guard_max_result_tokens": _Doc(
        _positive_int,
        "the guard's limit of every tool result and resource read, in tokens (Claude Code's default cap)",
    ),
    "guard_tool_limits": _Doc(
        _tool_limits,
        "`name=tokens,...`: per-tool limits replacing `GUARD_MAX_RESULT_TOKENS` for those tools "
        "(0: no limit); as a keyword, also a dict",
    ),
    "guard_budget": _Doc(
        _choice(GUARD_BUDGET_MODES),
        "`off`, `truncate` or `reject`: a result that would take its budget scope past the context "
        "window gets what is left, or is refused",
    ),
    "guard_repeat_limit": _Doc(
        _non_negative_int,
        "more calls than this of the same tool with the same arguments within the window, in one "
        "scope: the `GUARD` mode applies to the rest (0: off)",
    ),
    "guard_repeat_window": _Doc(
        _positive_float,
        "the repeat limit's window, in seconds",
    ),
    "guard_notice": _Doc(
        _text,
        "the guard's notice text (unset: the built-in one), with `{tool}` (or the resource URI), "
        "`{original_tokens}`, `{delivered_tokens}`, `{limit}`; other braces stay as written",
    ),
    "hosts": _Doc(
        _hosts,
        "`claude-code,codex,...`: hosts whose limits each response and listing is checked against "
        "(`claude-code`, `codex`, `copilot-cli`, `vscode`, `cursor`, `windsurf`, `gemini`); as a "
        "keyword, also a list",
        readme=True,
    ),
}


def env_variable(name: str) -> str:
    """The environment variable of a setting (content capture uses the GenAI-wide one)."""
    return CAPTURE_CONTENT_ENV if name == "capture_content" else PREFIX + name.upper()


class SettingDoc(NamedTuple):
    """A setting as the tables show it."""

    name: str
    variable: str
    # The default as a user would write it, or UNSET.
    default: str
    meaning: str
    in_readme: bool


def documented_settings() -> tuple[SettingDoc, ...]:
    """Every setting, in declaration order, for the generated settings tables."""
    return tuple(
        SettingDoc(
            name=name,
            variable=env_variable(name),
            default=doc.shown or _shown(Settings._field_defaults[name]),
            meaning=doc.meaning,
            in_readme=doc.readme,
        )
        for name, doc in _DOCS.items()
    )


def parse_setting(name: str, text: str) -> Any:
    """The value of setting `name` for this environment text; raises ValueError (or
    re.error) naming what is wrong."""
    return _DOCS[name].parse(text)


def _shown(value: object) -> str:
    if value is None or value == ():
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


_INVALID = object()


def _coerce(name: str, value: Any) -> Any:
    """A keyword given as a Python value: `guard_tool_limits` may be a mapping, `hosts` a
    list of names."""
    if name == "hosts" and isinstance(value, list | tuple):
        try:
            return _parse_hosts(str(host) for host in value)
        except ValueError as exc:
            _logger.warning("mcp-tokens: ignoring hosts=%r (%s); using the default", value, exc)
            return _INVALID
    if name == "guard_tool_limits" and isinstance(value, Mapping):
        try:
            return tuple((str(tool), _non_negative_int(str(limit))) for tool, limit in value.items())
        except ValueError as exc:
            _logger.warning("mcp-tokens: ignoring guard_tool_limits=%r (%s); using the default", value, exc)
            return _INVALID
    return value


def _parse(name: str, source: str, raw: str) -> Any:
    try:
        return parse_setting(name, raw)
    except (ValueError, re.error) as exc:
        _logger.warning("mcp-tokens: ignoring %s=%r (%s); using the default", source, raw, exc)
        return _INVALID
