# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

_instruments = ("mcp >= 1.23, < 3",)
