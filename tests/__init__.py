# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0
