# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Builds the guard from the settings (imported only when a guard setting is on)."""

from __future__ import annotations

import functools

from opentelemetry.instrumentation.mcp_tokens.config import ANALYSIS_PROCESS, Settings
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import TokenizerSpec
from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels
from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments
from opentelemetry.metrics import Meter

from .accountant import Accountant
from .core import Guard
from .policy import Policy
from .results import Assessment, Results
from .tokens import GuardTokenizer, Measuring

# How long a result that needs counting waits for the guard's measure on the response path
# (made ready when the patches are installed: the counting service answers within about a
# second of its start on an idle machine) before it is delivered unguarded (counted as a
# `no_exact_tokenizer` failure): at start-up only.
TOKENIZER_WAIT_S = 2.0
# How long the guard waits for the counting service to start (off the response path; an
# answer is waited for TOKENIZER_WAIT_S, on it).
REMOTE_START_S = 10.0


def _remote_measure(settings: Settings) -> Measuring:
    from .remote import RemoteMeasure  # noqa: PLC0415 -- its sockets only when the guard asks

    return RemoteMeasure(settings, connect_timeout=REMOTE_START_S, answer_timeout=TOKENIZER_WAIT_S)


def build_guard(settings: Settings, meter: Meter, labels: ServerLabels) -> Guard:
    """The guard for these settings, its tokenizer loading on a daemon thread."""
    tokenizer = GuardTokenizer(
        TokenizerSpec(settings.encoding, settings.tokenizer_file, settings.tokenizer_pattern),
        max_bytes=settings.max_bytes,
        wait_s=TOKENIZER_WAIT_S,
        remote=functools.partial(_remote_measure, settings)
        if settings.analysis == ANALYSIS_PROCESS
        else None,
    )

    off_path = Results(tokenizer.measure, settings.image_model, tokenizer.size_bound)

    def count_exactly(assessment: Assessment) -> int:
        return off_path.exact_tokens(assessment)

    accountant = Accountant(GuardInstruments(meter), labels, count_exactly)
    guard = Guard(settings, Policy.from_settings(settings), tokenizer, accountant)
    guard.start()
    return guard
