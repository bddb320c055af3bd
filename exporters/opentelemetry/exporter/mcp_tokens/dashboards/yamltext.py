# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""A tiny, deterministic YAML writer for the generated rule and provisioning files.

The package must not depend on PyYAML at run time just to write a few files, and the
output has to be byte-stable so that a regenerated file can be compared with the
committed one. Only what the generator produces is supported: mappings with string
keys, lists, strings, integers, floats, booleans and None. Strings are written plain
when that cannot change their meaning, as a literal block (``|-``) when they span
lines, single-quoted when printable, and otherwise double-quoted with escapes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

YamlValue = object
"""Anything `dump` accepts: nested Mappings/Sequences of str, int, float, bool, None."""

_INDENT = "  "
# Plain scalars: no YAML indicator at the start, no ": " or " #" inside, nothing that
# reads as another type. Kept deliberately narrower than the YAML spec allows.
_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_ ./:#'(),%-]*")
_DURATION = re.compile(r"[0-9]+[smhdwy]")
_RESERVED = frozenset(
    {"true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", ".nan", "-.inf"}
)


def dump(value: YamlValue, header: str = "") -> str:
    """`value` as a YAML document; `header` lines become leading ``#`` comments."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]
    lines.extend(_node(value, 0))
    return "\n".join(lines) + "\n"


def scalar(value: YamlValue) -> str:
    """One scalar in flow form (used for keys, list items and mapping values)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"YAML output does not support non-finite floats, got {value!r}")
        text = repr(value)
        # YAML 1.1 readers (PyYAML) only see a float if it has a dot: 1e-05 -> 1.0e-05.
        return text if "." in text else text.replace("e", ".0e", 1)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot write {type(value).__name__} as a YAML scalar: {value!r}")


def _string(text: str) -> str:
    if _DURATION.fullmatch(text):
        return text
    if (
        _PLAIN.fullmatch(text)
        and text.lower() not in _RESERVED
        and not text.endswith((" ", ":"))
        and ": " not in text
        and " #" not in text
    ):
        return text
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return _double_quoted(text)


def _double_quoted(text: str) -> str:
    """A YAML double-quoted scalar; anything not plainly printable becomes an escape."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char.isprintable():  # never true for surrogates or non-characters
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02x}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def _is_block_friendly(text: str) -> bool:
    """A multi-line string that a ``|-`` literal block reproduces exactly."""
    if "\n" not in text or text.endswith("\n") or text.startswith((" ", "\n")):
        return False
    return all(line == line.rstrip() and line.isprintable() for line in text.split("\n"))


def _node(value: YamlValue, depth: int) -> list[str]:
    """Lines for a value that starts on its own line at `depth`."""
    pad = _INDENT * depth
    if isinstance(value, Mapping):
        if not value:
            return [pad + "{}"]
        lines: list[str] = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"YAML mapping keys must be strings, got {key!r}")
            lines.extend(_entry(pad + scalar(key) + ":", item, depth))
        return lines
    if isinstance(value, Sequence) and not isinstance(value, str):
        if not value:
            return [pad + "[]"]
        lines = []
        for item in value:
            lines.extend(_list_item(item, depth))
        return lines
    return [pad + scalar(value)]


def _entry(prefix: str, item: YamlValue, depth: int) -> list[str]:
    """A ``key:`` line followed by its value, inline when the value is a scalar."""
    if isinstance(item, Mapping) and item:
        return [prefix, *_node(item, depth + 1)]
    if isinstance(item, Sequence) and not isinstance(item, str) and item:
        # Lists under a key are not indented further, as kubectl and promtool examples do.
        return [prefix, *_node(item, depth)]
    if isinstance(item, str) and _is_block_friendly(item):
        body = _INDENT * (depth + 1)
        return [prefix + " |-", *(body + line if line else "" for line in item.split("\n"))]
    if isinstance(item, (Mapping, Sequence)) and not isinstance(item, str):
        return [prefix + (" {}" if isinstance(item, Mapping) else " []")]
    return [prefix + " " + scalar(item)]


def _list_item(item: YamlValue, depth: int) -> list[str]:
    pad = _INDENT * depth
    if isinstance(item, Mapping) and item:
        # "- " then the mapping's lines, the first sharing the dash line.
        inner = _node(item, depth + 1)
        first = inner[0][len(_INDENT * (depth + 1)) :]
        return [pad + "- " + first, *inner[1:]]
    if isinstance(item, Sequence) and not isinstance(item, str) and item:
        inner = _node(item, depth + 1)
        first = inner[0][len(_INDENT * (depth + 1)) :]
        return [pad + "- " + first, *inner[1:]]
    if isinstance(item, str) and _is_block_friendly(item):
        body = _INDENT * (depth + 1)
        return [pad + "- |-", *(body + line if line else "" for line in item.split("\n"))]
    return [pad + "- " + _node(item, 0)[0]]
