# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Builds the guard from the settings (imported only when a guard setting is on)."""

from __future__ import annotations

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments
from opentelemetry.metrics import Meter

from .accountant import Accountant
from .core import Guard
from .policy import Policy
from .results import Assessment, Results
from .tokens import GuardTokenizer

# How long a result that needs counting waits for the guard's tokenizer on the response
# path (its load starts with the patches and takes about 0.4 s on an idle machine) before it
# is delivered unguarded (counted as a `no_exact_tokenizer` failure): at start-up only.
TOKENIZER_WAIT_S = 2.0


def build_guard(settings: Settings, meter: Meter, labels: ServerLabels) -> Guard:
    """The guard for these settings, its tokenizer loading on a daemon thread."""
    tokenizer = GuardTokenizer(
        TokenizerSpec(settings.encoding, settings.tokenizer_file, settings.tokenizer_pattern),
        max_bytes=settings.max_bytes,
        wait_s=TOKENIZER_WAIT_S,
    )

    off_path = Results(tokenizer.measure, settings.image_model)

    def count_exactly(assessment: Assessment) -> int:
        return off_path.exact_tokens(assessment)

    accountant = Accountant(GuardInstruments(meter), labels, count_exactly)
    guard = Guard(settings, Policy.from_settings(settings), tokenizer, accountant)
    guard.start()
    return guard
