# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The opt-in guard: caps what a tool result or resource read may cost, with a notice.

`build.build_guard` makes one only when a guard setting is on (`Settings.guard_enabled`);
with every guard setting off nothing but this constant is loaded, and patches skip the
guard with one check. See core.py for the checks, results.py for how a result is cut,
tokens.py for what is counted on the response path, accountant.py for what is counted
after it.
"""

from __future__ import annotations

# The methods whose results the guard holds to a limit.
GUARDED_METHODS = frozenset({"tools/call", "resources/read"})
