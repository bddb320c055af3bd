# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

import pytest
from opentelemetry.instrumentation.mcp_tokens.analyst import Counters
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter,
    TokenizerSpec,
    load_bundled_encoding,
    load_tokenizer,
)


@pytest.fixture(scope="session")
def o200k():  # type: ignore[no-untyped-def]
    """tiktoken's own Encoding for o200k_base, built from the bundled, verified ranks."""
    return load_bundled_encoding("o200k_base")


@pytest.fixture(scope="session")
def counter() -> TokenCounter:
    """The exact o200k counter the instrumentation uses."""
    tokenizer = load_tokenizer(TokenizerSpec("o200k_base"))
    assert tokenizer.exact
    return TokenCounter(tokenizer)


@pytest.fixture(scope="session")
def counters() -> Counters:
    """The exact o200k counters an `Analyst` counts with (as a counting process loads them)."""
    loaded = Counters.load(TokenizerSpec("o200k_base"))
    assert loaded.status.exact
    return loaded
