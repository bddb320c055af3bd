# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What a tool's outputSchema says about the size of its responses, before any call.

For each schema node the walker computes the tokens of the largest JSON instance it
allows (compact, as structuredContent travels) and whether that size is bounded:

- arrays are bounded by `maxItems`, strings by `maxLength` (or a fixed-length `format`:
  uuid, date-time, ...), maps (`additionalProperties`, `patternProperties`) by
  `maxProperties` and bounded keys; numbers, booleans, null, `const` and `enum` always are.
  An object with declared `properties` and no `additionalProperties` is taken as closed,
  as schema generators mean it; `{"type": "object"}` alone is an open map.
- `$ref` (local JSON pointers, e.g. pydantic's `#/$defs/...`) is resolved once per target;
  a recursive reference is unbounded. `anyOf`/`oneOf`/`type: [...]`/`then`/`else` take the
  largest branch; `allOf` merges its objects.
- Keys, `const` and `enum` values and integer ranges are counted exactly with the
  tokenizer. Free text counts `Assumptions.chars_per_token` characters per token: 1.0 is
  a hard bound for ASCII (every token is at least one byte).
- An unbounded part still gets a nominal size (`unbounded_items` items,
  `unbounded_string_chars` characters), so that an unbounded tool has a comparable worst
  case; it is reported as unbounded, with the path and cause of each unbounded part.

The response worst case doubles the structuredContent when `text_copy` is set: the spec
asks tools that return structured content to return its JSON as a text block too, and the
engine counts both (runtime analyses flag the copy as duplicate overhead).

The walk is bounded (depth, nodes, enum values), so a hostile schema costs milliseconds.
A tool without an outputSchema is `UNKNOWN`: nothing is guessed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import schema as js

TOKEN_CEILING = 10**9  # worst cases are clamped here: beyond it every tier is critical anyway
MAX_DEPTH = 128  # nested schema nodes walked (about 4 Python frames each)
MAX_NODES = 100_000
MAX_ENUM_VALUES_COUNTED = 1_000
MAX_PARTS_KEPT = 32
MAP_KEY_CHARS = 32  # nominal length of a map key with no maxLength

# Longest string each fixed-length format allows (RFC 3339, RFC 4122, RFC 5321, ...).
FORMAT_LENGTHS = {
    "date": 10,
    "time": 21,
    "date-time": 35,
    "uuid": 36,
    "ipv4": 15,
    "ipv6": 45,
    "email": 254,
    "idn-email": 254,
    "hostname": 253,
    "idn-hostname": 253,
}
_WORST_INTEGER = str(-(2**53 - 1))  # the most negative integer JSON parsers keep exactly
_WORST_NUMBER = "-1.7976931348623157e+308"


class Bound(str, Enum):
    BOUNDED = "bounded"
    UNBOUNDED = "unbounded"
    UNKNOWN = "unknown"


class Cause(str, Enum):
    ARRAY = "array without maxItems"
    MAP = "map without maxProperties"
    STRING = "string without maxLength"
    ANY = "value of any type"
    RECURSIVE = "recursive schema"
    UNRESOLVED = "unresolvable $ref"
    TOO_COMPLEX = "too deep or too large to analyse"

    @property
    def is_collection(self) -> bool:
        return self in (Cause.ARRAY, Cause.MAP, Cause.RECURSIVE)


@dataclass(frozen=True)
class Assumptions:
    chars_per_token: float = 1.0
    unbounded_items: int = 100
    unbounded_string_chars: int = 1000
    text_copy: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.chars_per_token) and self.chars_per_token > 0):
            raise ValueError(f"chars per token must be a positive number, got {self.chars_per_token!r}")
        for name in ("unbounded_items", "unbounded_string_chars"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name.replace('_', ' ')} must be >= 0, got {getattr(self, name)}")

    def as_dict(self) -> dict[str, Any]:
        return {
            "chars_per_token": self.chars_per_token,
            "text_copy": self.text_copy,
            "unbounded_items": self.unbounded_items,
            "unbounded_string_chars": self.unbounded_string_chars,
        }


@dataclass(frozen=True)
class UnboundedPart:
    path: str
    cause: Cause


@dataclass(frozen=True)
class FieldEstimate:
    """One top-level field of the structured output: worst-case tokens with its key."""

    name: str
    tokens: int
    bounded: bool
    kind: str


@dataclass(frozen=True)
class SchemaStats:
    depth: int = 0  # nesting levels of objects and arrays in an instance
    deepest_path: str = "$"
    fields: int = 0  # properties declared anywhere in the schema
    largest_enum: int = 0  # values of the largest enum
    largest_enum_path: str = ""
    largest_enum_tokens: int = 0  # tokens of that enum's values in the definition


@dataclass(frozen=True)
class OutputEstimate:
    bound: Bound
    structured_tokens: int | None = None  # worst case of one copy of the structured content
    worst_case_tokens: int | None = None  # worst case of the whole response
    fields: tuple[FieldEstimate, ...] = ()
    unbounded: tuple[UnboundedPart, ...] = ()
    stats: SchemaStats = field(default_factory=SchemaStats)
    note: str | None = None

    def paths(self, *, collection: bool, limit: int = 3) -> str:
        """Unbounded collections (or, if not `collection`, uncapped values): '$.a, $.b and 2 more'."""
        found = list(dict.fromkeys(p.path for p in self.unbounded if p.cause.is_collection == collection))
        shown = ", ".join(found[:limit])
        return f"{shown} and {len(found) - limit} more" if len(found) > limit else shown


def estimate_output(
    tool: Mapping[str, Any], count: Callable[[str], int], assumptions: Assumptions
) -> OutputEstimate:
    """The static response estimate of one tool definition (wire dict)."""
    schema = tool.get("outputSchema")
    if schema is None:
        return OutputEstimate(Bound.UNKNOWN, note="no outputSchema")
    if not isinstance(schema, Mapping):
        return OutputEstimate(Bound.UNKNOWN, note="outputSchema is not an object")
    walker = _Walker(schema, count, assumptions)
    root = walker.visit(schema, "$", 0)
    structured = min(root.tokens, TOKEN_CEILING)
    copies = 2 if assumptions.text_copy else 1
    return OutputEstimate(
        bound=Bound.BOUNDED if root.bounded else Bound.UNBOUNDED,
        structured_tokens=structured,
        worst_case_tokens=min(structured * copies, TOKEN_CEILING),
        fields=tuple(walker.top_fields.values()),
        unbounded=tuple(walker.parts),
        stats=walker.stats(),
    )


def schema_stats(schema: object, count: Callable[[str], int]) -> SchemaStats:
    """Depth, fields and largest enum of any schema (used for inputSchema)."""
    if not isinstance(schema, Mapping):
        return SchemaStats()
    walker = _Walker(schema, count, Assumptions())
    walker.visit(schema, "$", 0)
    return walker.stats()


@dataclass(frozen=True)
class _Estimate:
    tokens: int
    bounded: bool
    kind: str


_NEVER = _Estimate(0, True, "never")


class _Walker:
    """One bounded walk over a schema; remembers unbounded parts, top fields and stats."""

    def __init__(
        self, root: Mapping[str, Any], count: Callable[[str], int], assumptions: Assumptions
    ) -> None:
        self._root = root
        self._count = count
        self._assume = assumptions
        self._nodes = 0
        self._active = 0
        self._refs: dict[str, _Estimate] = {}
        self._resolving: set[str] = set()
        self._key_tokens: dict[str, int] = {}
        self.parts: list[UnboundedPart] = []
        self.top_fields: dict[str, FieldEstimate] = {}
        self._depth, self._deepest, self._fields = 0, "$", 0
        self._enum = (0, "", 0)

    def stats(self) -> SchemaStats:
        values, path, tokens = self._enum
        return SchemaStats(self._depth, self._deepest, self._fields, values, path, tokens)

    def visit(self, schema: object, path: str, level: int) -> _Estimate:
        self._nodes += 1
        if self._nodes > MAX_NODES or self._active >= MAX_DEPTH:
            return self._unbounded(path, Cause.TOO_COMPLEX, self._nominal_text())
        self._active += 1
        try:
            return self._visit(schema, path, level)
        finally:
            self._active -= 1

    def _visit(self, schema: object, path: str, level: int) -> _Estimate:
        if schema is False:
            return _NEVER
        if not isinstance(schema, Mapping):  # `true`, or junk where a schema should be
            return self._any(path)
        if "$ref" in schema:
            return self._ref(schema["$ref"], path, level)
        if "const" in schema:
            return _Estimate(self._literal(schema["const"]), True, "const")
        if isinstance(schema.get("enum"), list):
            return self._enum_values(schema["enum"], path)
        if isinstance(schema.get("allOf"), list):
            return self.visit(js.merge_all_of(schema), path, level)
        branches = js.branches(schema)
        if branches:
            return self._largest([self.visit(branch, path, level) for branch in branches], "union")
        kinds = schema.get("type")
        if isinstance(kinds, list):
            variants = [{**schema, "type": kind} for kind in kinds if isinstance(kind, str)]
            return self._largest([self.visit(variant, path, level) for variant in variants], "union")
        return self._typed(schema, js.type_of(schema), path, level)

    def _typed(self, schema: Mapping[str, Any], kind: str | None, path: str, level: int) -> _Estimate:
        if kind == "object":
            return self._object(schema, path, level + 1)
        if kind == "array":
            return self._array(schema, path, level + 1)
        if kind == "string":
            return self._string(schema, path)
        if kind == "integer":
            return _Estimate(self._integer_tokens(schema), True, "integer")
        if kind == "number":
            return _Estimate(self._count(_WORST_NUMBER), True, "number")
        if kind == "boolean":
            return _Estimate(self._count("false"), True, "boolean")
        if kind == "null":
            return _Estimate(self._count("null"), True, "null")
        return self._any(path)

    def _object(self, schema: Mapping[str, Any], path: str, level: int) -> _Estimate:
        self._note_level(level, path)
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        tokens, bounded = 2, True  # the braces
        for name, subschema in properties.items():
            self._fields += 1
            value = self.visit(subschema, js.child_path(path, str(name)), level)
            entry = self._key(str(name)) + value.tokens
            if path == "$":
                self.top_fields[str(name)] = FieldEstimate(str(name), entry, value.bounded, value.kind)
            tokens, bounded = tokens + entry, bounded and value.bounded
        entries = len(properties)
        if js.is_open(schema, properties):
            extra, count, extra_bounded = self._map_entries(schema, path, level, len(properties))
            tokens, entries, bounded = tokens + extra, entries + count, bounded and extra_bounded
        return _Estimate(_clamp(tokens + max(0, entries - 1)), bounded, "object")

    def _map_entries(
        self, schema: Mapping[str, Any], path: str, level: int, declared: int
    ) -> tuple[int, int, bool]:
        """Tokens, entry count and boundedness of the entries a map allows beyond its properties."""
        value_schemas: list[object] = []
        additional = schema.get("additionalProperties", True)
        if additional is not False:
            value_schemas.append(additional)
        patterns = schema.get("patternProperties")
        if isinstance(patterns, Mapping):
            value_schemas.extend(patterns.values())
        values = [self.visit(value, f"{path}.*", level) for value in value_schemas]
        value = self._largest(values, "any") if values else _NEVER
        key_tokens, key_bounded = self._map_key(schema.get("propertyNames"))
        limit = js.count_of(schema.get("maxProperties"))
        if limit is not None:
            entries = max(0, limit - declared)
            bounded = value.bounded and key_bounded
        else:
            entries = self._assume.unbounded_items
            bounded = False
            self._record(path, Cause.MAP)
        return _clamp(entries * (key_tokens + value.tokens + 1)), entries, bounded

    def _map_key(self, names: object) -> tuple[int, bool]:
        if isinstance(names, Mapping):
            if isinstance(names.get("enum"), list):
                return self._enum_tokens(names["enum"]) + 1, True
            length = js.count_of(names.get("maxLength"))
            if length is not None:
                return self._text_tokens(length) + 2, True
        return self._text_tokens(MAP_KEY_CHARS) + 2, False

    def _array(self, schema: Mapping[str, Any], path: str, level: int) -> _Estimate:
        self._note_level(level, path)
        items = schema.get("items")
        prefix = schema.get("prefixItems")
        if isinstance(items, list):  # draft-07 tuples
            prefix, items = items, schema.get("additionalItems", True)
        prefix = prefix if isinstance(prefix, list) else []
        fixed = [self.visit(item, f"{path}[{index}]", level) for index, item in enumerate(prefix)]
        rest = (
            self.visit(True if items is None else items, f"{path}[]", level) if items is not False else None
        )
        limit = js.count_of(schema.get("maxItems"))
        if rest is None:
            count, bounded = len(fixed), True
        elif limit is not None:
            count, bounded = limit, rest.bounded
        else:
            count, bounded = len(fixed) + self._assume.unbounded_items, False
            self._record(path, Cause.ARRAY)
        shown = fixed[:count]
        tokens = 2 + sum(item.tokens for item in shown) + max(0, count - len(shown)) * (rest or _NEVER).tokens
        bounded = bounded and all(item.bounded for item in shown)
        return _Estimate(_clamp(tokens + max(0, count - 1)), bounded, "array")

    def _string(self, schema: Mapping[str, Any], path: str) -> _Estimate:
        limit = js.count_of(schema.get("maxLength"))
        fixed = FORMAT_LENGTHS.get(str(schema.get("format", "")))
        if limit is not None:
            return _Estimate(self._text_tokens(limit) + 1, True, "string")
        if fixed is not None:
            return _Estimate(self._text_tokens(fixed) + 1, True, "string")
        return self._unbounded(path, Cause.STRING, self._nominal_text() + 1, "string")

    def _integer_tokens(self, schema: Mapping[str, Any]) -> int:
        low = js.first_number(schema, "minimum", "exclusiveMinimum")
        high = js.first_number(schema, "maximum", "exclusiveMaximum")
        if low is None or high is None or max(abs(low), abs(high)) > 1e18:
            return self._count(_WORST_INTEGER)
        return max(self._count(str(int(low))), self._count(str(int(high))))

    def _enum_values(self, values: list[Any], path: str) -> _Estimate:
        definition = self._literal(values)
        if len(values) > self._enum[0]:
            self._enum = (len(values), path, definition)
        return _Estimate(self._enum_tokens(values), True, "enum")

    def _enum_tokens(self, values: list[Any]) -> int:
        counted = values[:MAX_ENUM_VALUES_COUNTED]
        return max((self._literal(value) for value in counted), default=0)

    def _ref(self, ref: object, path: str, level: int) -> _Estimate:
        key = str(ref)
        if key in self._refs:
            return self._refs[key]
        if key in self._resolving:
            return self._unbounded(path, Cause.RECURSIVE, self._nominal_text())
        target = js.resolve(self._root, ref)
        if target is None:
            return self._unbounded(path, Cause.UNRESOLVED, self._nominal_text())
        self._resolving.add(key)
        try:
            result = self.visit(target, path, level)
        finally:
            self._resolving.discard(key)
        self._refs[key] = result
        return result

    def _any(self, path: str) -> _Estimate:
        return self._unbounded(path, Cause.ANY, self._nominal_text())

    def _unbounded(self, path: str, cause: Cause, tokens: int, kind: str = "any") -> _Estimate:
        self._record(path, cause)
        return _Estimate(tokens, False, kind)

    def _record(self, path: str, cause: Cause) -> None:
        if len(self.parts) < MAX_PARTS_KEPT:
            self.parts.append(UnboundedPart(path, cause))

    def _largest(self, estimates: list[_Estimate], kind: str) -> _Estimate:
        if not estimates:
            return _NEVER
        largest = max(estimates, key=lambda estimate: estimate.tokens)
        kinds = {estimate.kind for estimate in estimates if estimate.kind != "null"}
        label = kinds.pop() if len(kinds) == 1 else kind
        return _Estimate(largest.tokens, all(estimate.bounded for estimate in estimates), label)

    def _note_level(self, level: int, path: str) -> None:
        if level > self._depth:
            self._depth, self._deepest = level, path

    def _key(self, name: str) -> int:
        if name not in self._key_tokens:
            self._key_tokens[name] = self._count(json.dumps(name, ensure_ascii=False) + ":")
        return self._key_tokens[name]

    def _literal(self, value: object) -> int:
        try:
            return self._count(json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str))
        except (ValueError, RecursionError):
            return 0

    def _text_tokens(self, chars: int) -> int:
        return _clamp(math.ceil(chars / self._assume.chars_per_token))

    def _nominal_text(self) -> int:
        return self._text_tokens(self._assume.unbounded_string_chars)


def _clamp(tokens: int) -> int:
    return min(tokens, TOKEN_CEILING)
