# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Make `tests.integration.apps` importable when pytest runs from its own entry point (which,
unlike `python -m pytest`, does not put the working directory on sys.path)."""

from __future__ import annotations

import sys
from pathlib import Path

_REPO_ROOT = str(Path(__file__).resolve().parents[2])
if _REPO_ROOT not in sys.path:
    sys.path.insert(0, _REPO_ROOT)
