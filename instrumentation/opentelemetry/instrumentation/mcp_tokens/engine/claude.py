# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Claude encodings: `claude-<version>` names, exact counts with ctok, estimates without.

Most MCP results are read by Claude, whose tokenizer Anthropic does not publish. ctok
(PyPI, MIT, Python >= 3.12, the `claude` extra) reconstructs its counts offline per model
generation; claude_names.py names them as encodings (`claude`, `claude-<version>`).

Counts are content tokens: ctok's count of the text as one user message, without the
message frame. With ctok installed they are exact (`claude_exact`); without it (or on
Python 3.10/3.11) a `claude-*` encoding is the calibrated estimate of `claude_estimate`,
flagged `exact=False`.

Importing this module imports neither ctok nor the exact counter.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any

from .claude_names import canonical_name, claude_version, family_of

# The release the exact counter reproduces (its rules are ported from this one; see
# claude_stream.py) and the tests compare against.
CTOK_VERSION = "1.3.0"


class ClaudeUnavailable(Exception):
    """Exact Claude counts cannot load here (no ctok, another ctok, an old Python)."""


def load_claude(encoding: str) -> Any:
    """The exact counter of a Claude encoding (`ClaudeTokenizer`); raises
    ClaudeUnavailable when ctok cannot serve it here, ValueError for a non-Claude name."""
    version = claude_version(encoding)
    if version is None:
        raise ValueError(f"{encoding!r} is not a Claude encoding (claude or claude-<version>)")
    family_of(version)
    if not _python_runs_ctok():
        raise ClaudeUnavailable("exact Claude counts need ctok, which needs Python >= 3.12")
    try:
        installed = metadata.version("ctok")
    except metadata.PackageNotFoundError as exc:
        raise ClaudeUnavailable("ctok is not installed (install the `claude` extra)") from exc
    if installed != CTOK_VERSION:
        raise ClaudeUnavailable(
            f"ctok {installed} is installed; the exact counter reproduces ctok {CTOK_VERSION}"
        )
    from . import claude_exact  # noqa: PLC0415 -- imports ctok, an optional extra

    return claude_exact.ClaudeTokenizer(canonical_name(encoding), version)


def _python_runs_ctok() -> bool:
    return sys.version_info >= (3, 12)
