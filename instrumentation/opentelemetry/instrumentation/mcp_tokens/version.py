# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

__version__ = "0.1.0"
