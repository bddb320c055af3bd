# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""`python -m opentelemetry.exporter.mcp_tokens.cli`: the `mcp-tokens` command."""

from __future__ import annotations

import sys

from .app import main

if __name__ == "__main__":
    sys.exit(main())
