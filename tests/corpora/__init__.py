# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Test corpora, generated deterministically in code from small committed word lists.

Every generator takes a `random.Random` so a corpus is the same on every machine and
every run; nothing is downloaded and nothing depends on the host's files.
"""
