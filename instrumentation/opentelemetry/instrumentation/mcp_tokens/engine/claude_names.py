# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Claude encoding names: `claude` and `claude-<version>`, and the ctok family each means.

- `claude` is ctok's default family (Claude 3 through Opus 4.6);
- `claude-<version>` is the family ctok routes that model version to: `claude-3`,
  `claude-4.5` (the same family), `claude-4.7` (Opus 4.7), `claude-4.8` and later (the
  4.7 vocabulary with another message frame).
"""

from __future__ import annotations

import re

CLAUDE = "claude"
DEFAULT_VERSION = "3.0"  # what ctok counts with when no version is asked for
_NAME = re.compile(r"claude(?:-(\d+(?:\.\d+)*))?")


def claude_version(encoding: str) -> str | None:
    """The ctok version an encoding names ("claude-4.7" -> "4.7", "claude" -> "3.0"), or
    None when it is not a Claude encoding."""
    match = _NAME.fullmatch(encoding.strip().lower())
    if match is None:
        return None
    version = match.group(1) or DEFAULT_VERSION
    return version if "." in version else f"{version}.0"


def is_claude(encoding: str) -> bool:
    return claude_version(encoding) is not None


def family_of(version: str) -> str:
    """ctok's family for a version, by its published routing: [3.0, 4.7) v3, [4.7, 4.8)
    v4.7, 4.8 and later v4.8 (the 4.7 vocabulary)."""
    parts = tuple(int(p) for p in version.split("."))
    if parts < (3,):
        raise ValueError(f"no Claude tokenizer family for version {version!r} (3.0 or later)")
    if parts >= (4, 8):
        return "v4.8"
    if parts >= (4, 7):
        return "v4.7"
    return "v3"


def canonical_name(encoding: str) -> str:
    """How a Claude encoding is reported (`mcp_tokens.encoding`): lower case, trimmed."""
    return encoding.strip().lower()


def max_tokens(text: str) -> int:
    """An upper bound of the Claude tokens of `text`, from its length alone.

    Each character is at most four UTF-8 bytes, each tiled by at most one byte token; each
    run of characters takes at most three markers (a case marker, ⟨bow⟩, ⟨eow⟩) and the
    frame one more, and trailing newlines cost at most one token each: at most 7 tokens per
    character plus 2, rounded up to 8.
    """
    return 8 * len(text) + 2
