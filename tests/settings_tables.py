# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The settings tables, generated from `config.Settings`: `python -m tests.settings_tables`.

`make docs` runs it. Each setting's row (variable, default, meaning) comes from its
declaration in config.py, written between markers, the way `make bench` writes the
benchmark tables:

- docs/telemetry.md, every setting: `<!-- settings:table -->` ... `<!-- /settings:table -->`;
- README.md, the settings declared `readme=True`: `<!-- settings:readme -->` ...
  `<!-- /settings:readme -->`;
- the instrumentor's docstring (the user guide, read with `help()`), every setting as a
  reStructuredText definition list: `.. settings:table` ... `.. /settings:table`.

`--check` writes nothing and exits 1 naming the files that differ;
tests/unit/test_settings_tables.py does the same check.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from opentelemetry.instrumentation.mcp_tokens.config import PREFIX, UNSET, SettingDoc, documented_settings

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTRUMENTOR = Path("instrumentation/opentelemetry/instrumentation/mcp_tokens/__init__.py")
# The docstring's lines may be this long, indentation included (ruff's line length is 110).
DOCSTRING_WIDTH = 100


def _code(text: str) -> str:
    return f"`{text}`"


def _markdown_default(setting: SettingDoc) -> str:
    return setting.default if setting.default == UNSET else _code(setting.default)


def telemetry_table(settings: Sequence[SettingDoc]) -> str:
    """Every setting, with its whole variable name."""
    rows = [f"| {_code(s.variable)} | {_markdown_default(s)} | {s.meaning} |" for s in settings]
    return "\n".join(["| variable | default | meaning |", "|---|---|---|", *rows])


def readme_table(settings: Sequence[SettingDoc]) -> str:
    """The settings a user is most likely to set; the common prefix shortened to `...`."""
    rows = [
        f"| {_code(_short(s.variable))} | {_markdown_default(s)} | {s.meaning} |"
        for s in settings
        if s.in_readme
    ]
    return "\n".join(["| variable | default | |", "|---|---|---|", *rows])


def _short(variable: str) -> str:
    return "..._" + variable.removeprefix(PREFIX) if variable.startswith(PREFIX) else variable


def docstring_list(settings: Sequence[SettingDoc]) -> str:
    """A reStructuredText definition list: the variable and its default, then the meaning."""
    entries = []
    for setting in settings:
        default = "unset by default" if setting.default == UNSET else f"default ``{setting.default}``"
        meaning = textwrap.fill(
            _rest_literals(setting.meaning), DOCSTRING_WIDTH, initial_indent="    ", subsequent_indent="    "
        )
        entries.append(f"``{setting.variable}`` ({default})\n{meaning}")
    text = "\n".join(entries)
    if "\\" in text or '"""' in text:
        raise ValueError("a setting's text would break the instrumentor's docstring")
    # Blank lines around it: reStructuredText ends a comment (the markers) at one.
    return f"\n{text}\n"


def _rest_literals(text: str) -> str:
    """Markdown's `code` is reStructuredText's ``code``."""
    return re.sub(r"`([^`]+)`", r"``\1``", text)


@dataclass(frozen=True)
class Section:
    path: Path
    start: str
    end: str
    render: Callable[[Sequence[SettingDoc]], str]


SECTIONS = (
    Section(
        Path("docs/telemetry.md"), "<!-- settings:table -->", "<!-- /settings:table -->", telemetry_table
    ),
    Section(Path("README.md"), "<!-- settings:readme -->", "<!-- /settings:readme -->", readme_table),
    Section(INSTRUMENTOR, ".. settings:table", ".. /settings:table", docstring_list),
)


def rewritten(text: str, section: Section, settings: Sequence[SettingDoc]) -> str:
    """`text` with what stands between the section's markers generated anew; ValueError
    when the markers are missing."""
    pattern = re.compile(re.escape(section.start) + r"\n.*?" + re.escape(section.end), re.DOTALL)
    if not pattern.search(text):
        raise ValueError(f"{section.path} has no section {section.start} ... {section.end}")
    body = section.render(settings)
    return pattern.sub(lambda _: f"{section.start}\n{body}\n{section.end}", text, count=1)


def stale(root: Path = REPO_ROOT, settings: Sequence[SettingDoc] | None = None) -> list[Path]:
    """The files whose settings section differs from what config.py declares."""
    found = documented_settings() if settings is None else settings
    differ = []
    for section in SECTIONS:
        text = (root / section.path).read_text(encoding="utf-8")
        if rewritten(text, section, found) != text:
            differ.append(section.path)
    return differ


def write(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite every settings section; the files that changed."""
    changed = []
    for section in SECTIONS:
        path = root / section.path
        text = path.read_text(encoding="utf-8")
        new = rewritten(text, section, documented_settings())
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(section.path)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is stale")
    args = parser.parse_args(argv)
    if args.check:
        differ = stale()
        for path in differ:
            print(f"{path}: settings table differs from config.py (run `make docs`)")
        return 1 if differ else 0
    for path in write():
        print(f"{path}: settings table rewritten from config.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
