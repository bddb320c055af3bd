# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`mcp-tokens.lock.json`: a server's token contract, committed next to its code.

One entry per tool (definition tokens, bound, worst-case tokens, risk tier, digest of the
definition) plus the settings the numbers depend on (encoding, risk thresholds, static
assumptions), so `diff` only compares like with like. Keys are sorted and there is no
timestamp: the same server gives the same bytes, and a review diff shows real changes.

The file is written atomically (a temporary file in the same directory, fsync, rename):
a failure leaves the previous lock untouched. Reading validates every field and names
the first bad one; a format version this code does not know is refused with its own
exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.risk import RiskThresholds, RiskTier

from .errors import CliError, ExitCode
from .profile import ServerProfile, Settings
from .static import Assumptions, Bound

FORMAT = "mcp-tokens.lock"
VERSION = 1
DEFAULT_PATH = "mcp-tokens.lock.json"
MAX_LOCK_BYTES = 64 << 20


@dataclass(frozen=True)
class ToolLock:
    definition_tokens: int
    bound: Bound
    worst_case_tokens: int | None
    risk: RiskTier | None
    digest: str


@dataclass(frozen=True)
class Lock:
    server_name: str | None
    server_version: str | None
    settings: Settings
    tools: Mapping[str, ToolLock]
    source: str = ""  # the file it was read from, or the live server it was profiled from

    @property
    def definition_tokens(self) -> int:
        return sum(tool.definition_tokens for tool in self.tools.values())


def from_profile(profile: ServerProfile) -> Lock:
    tools = {
        tool.name: ToolLock(
            definition_tokens=tool.definition.tokens,
            bound=tool.output.bound,
            worst_case_tokens=tool.output.worst_case_tokens,
            risk=tool.risk,
            digest=tool.definition.digest,
        )
        for tool in profile.tools
    }
    return Lock(profile.info.name, profile.info.version, profile.settings, tools, profile.target)


def to_json(lock: Lock) -> str:
    settings = lock.settings
    document = {
        "format": FORMAT,
        "version": VERSION,
        "server": {"name": lock.server_name, "version": lock.server_version},
        "settings": {
            "encoding": settings.encoding,
            "risk_thresholds": [settings.risk.low, settings.risk.medium, settings.risk.high],
            "assumptions": settings.assumptions.as_dict(),
        },
        "totals": {"tools": len(lock.tools), "definition_tokens": lock.definition_tokens},
        "tools": {
            name: {
                "definition_tokens": tool.definition_tokens,
                "bound": tool.bound.value,
                "worst_case_tokens": tool.worst_case_tokens,
                "risk": tool.risk.value if tool.risk is not None else None,
                "digest": tool.digest,
            }
            for name, tool in lock.tools.items()
        },
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(lock: Lock, path: Path) -> None:
    """Write `lock` to `path` atomically; raises CliError(WRITE_FAILED) and leaves `path` as it was."""
    text = to_json(lock)
    directory = path.parent if str(path.parent) else Path(".")
    temporary: str | None = None
    try:
        handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
        with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
        temporary = None
    except OSError as exc:
        raise CliError(ExitCode.WRITE_FAILED, f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


def read(path: Path) -> Lock:
    try:
        if path.stat().st_size > MAX_LOCK_BYTES:
            raise CliError(ExitCode.LOCK_INVALID, f"{path}: larger than {MAX_LOCK_BYTES >> 20} MiB")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(ExitCode.LOCK_INVALID, f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CliError(ExitCode.LOCK_INVALID, f"{path}: not UTF-8 text") from None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CliError(ExitCode.LOCK_INVALID, f"{path}: not valid JSON ({exc})") from None
    return parse(document, str(path))


def parse(document: object, source: str) -> Lock:
    reader = _Reader(source)
    root = reader.mapping(document, "the document")
    if root.get("format") != FORMAT:
        raise CliError(
            ExitCode.LOCK_INVALID, f"{source}: not an mcp-tokens lock file (format is not {FORMAT!r})"
        )
    version = root.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise reader.fail("version", "an integer", version)
    if version != VERSION:
        raise CliError(
            ExitCode.LOCK_INCOMPATIBLE,
            f"{source}: lock file format version {version!r} is not supported (this mcp-tokens reads version "
            f"{VERSION}); regenerate it with `mcp-tokens lock`",
        )
    server = reader.mapping(root.get("server"), "server")
    tools = reader.mapping(root.get("tools"), "tools")
    return Lock(
        server_name=reader.optional_str(server.get("name"), "server.name"),
        server_version=reader.optional_str(server.get("version"), "server.version"),
        settings=reader.settings(root.get("settings")),
        tools={str(name): reader.tool(value, f"tools.{name}") for name, value in tools.items()},
        source=source,
    )


class _Reader:
    """Typed access to a parsed lock document; every error names the file and the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, expected: str, value: object) -> CliError:
        shown = json.dumps(value, default=str)[:60]
        return CliError(ExitCode.LOCK_INVALID, f"{self.source}: {where}: expected {expected}, got {shown}")

    def mapping(self, value: object, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, "an object", value)
        return value

    def optional_str(self, value: object, where: str) -> str | None:
        if value is not None and not isinstance(value, str):
            raise self.fail(where, "a string or null", value)
        return value

    def count(self, value: object, where: str, *, nullable: bool = False) -> int | None:
        if value is None and nullable:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise self.fail(where, "a non-negative integer" + (" or null" if nullable else ""), value)
        return value

    def settings(self, value: object) -> Settings:
        settings = self.mapping(value, "settings")
        encoding = settings.get("encoding")
        if not isinstance(encoding, str) or not encoding:
            raise self.fail("settings.encoding", "an encoding name", encoding)
        thresholds = settings.get("risk_thresholds")
        try:
            risk = RiskThresholds(*thresholds)  # type: ignore[misc]
        except (TypeError, ValueError):
            raise self.fail("settings.risk_thresholds", "three increasing integers", thresholds) from None
        assumed = self.mapping(settings.get("assumptions"), "settings.assumptions")
        try:
            assumptions = Assumptions(
                chars_per_token=float(assumed["chars_per_token"]),
                unbounded_items=int(assumed["unbounded_items"]),
                unbounded_string_chars=int(assumed["unbounded_string_chars"]),
                text_copy=bool(assumed["text_copy"]),
            )
        except (KeyError, TypeError, ValueError):
            raise self.fail("settings.assumptions", "the four static assumptions", assumed) from None
        return Settings(encoding=encoding, risk=risk, assumptions=assumptions)

    def tool(self, value: object, where: str) -> ToolLock:
        entry = self.mapping(value, where)
        bound_text = entry.get("bound")
        try:
            bound = Bound(bound_text)
        except ValueError:
            raise self.fail(f"{where}.bound", "bounded, unbounded or unknown", bound_text) from None
        risk_text = entry.get("risk")
        try:
            risk = RiskTier(risk_text) if risk_text is not None else None
        except ValueError:
            raise self.fail(f"{where}.risk", "low, medium, high, critical or null", risk_text) from None
        digest = entry.get("digest")
        if not isinstance(digest, str) or not digest.startswith("sha256:"):
            raise self.fail(f"{where}.digest", "a sha256: digest", digest)
        tokens = self.count(entry.get("definition_tokens"), f"{where}.definition_tokens")
        assert tokens is not None
        return ToolLock(
            definition_tokens=tokens,
            bound=bound,
            worst_case_tokens=self.count(
                entry.get("worst_case_tokens"), f"{where}.worst_case_tokens", nullable=True
            ),
            risk=risk,
            digest=digest,
        )
