# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exit codes of `mcp-tokens` and the one error type that carries them.

Every failure the user can cause or meet (a bad flag, a server that will not start or
crashes, a malformed listing, an incompatible lock file) is raised as `CliError` with one
of these codes and a one-line message naming the bad input; `app.main` prints it as
``mcp-tokens: error: <message>`` and exits with the code. Nothing else reaches the user
as a traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    RISK_GATE = 1  # profile: a tool's risk is at or above --fail-on, or a --host is exceeded (--fail-on-host)
    USAGE = 2  # bad arguments (argparse uses 2 as well)
    DIFF_RISKY = 3  # diff: the worst change is RISKY
    DIFF_BREAKING = 4  # diff: the worst change is BREAKING
    CONNECT = 10  # the server could not be started or reached, or did not complete the handshake
    LISTING_FAILED = 11  # the server crashed, errored or timed out while listing tools
    LISTING_MALFORMED = 12  # the tools/list result is not a valid listing
    LISTING_TOO_LARGE = 13  # the listing exceeds the size limits
    CALL_FAILED = 14  # --call: the server answered with a JSON-RPC error, or timed out
    METRICS_UNREACHABLE = 15  # top: the /metrics endpoint could not be reached or answered an HTTP error
    METRICS_MALFORMED = 16  # top: the answer is not Prometheus text, or larger than --max-bytes
    LOCK_INVALID = 20  # a lock file is missing, unreadable or not a valid lock file
    LOCK_INCOMPATIBLE = 21  # a lock file's format version or settings cannot be compared
    WRITE_FAILED = 22  # the lock file could not be written
    INTERNAL = 70  # a bug in mcp-tokens
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODE_TABLE = (
    (ExitCode.OK, "success; diff: no change, or only SAFE/INFO changes"),
    (ExitCode.RISK_GATE, "profile: a risk at or above --fail-on; a --host exceeded (--fail-on-host)"),
    (ExitCode.USAGE, "invalid arguments"),
    (ExitCode.DIFF_RISKY, "diff: the worst change is RISKY"),
    (ExitCode.DIFF_BREAKING, "diff: the worst change is BREAKING"),
    (ExitCode.CONNECT, "server could not be started or reached, or failed the handshake"),
    (ExitCode.LISTING_FAILED, "server crashed, errored or timed out while listing tools"),
    (ExitCode.LISTING_MALFORMED, "malformed tools/list result"),
    (ExitCode.LISTING_TOO_LARGE, "tools/list result over the size limits"),
    (ExitCode.CALL_FAILED, "--call failed (JSON-RPC error, timeout, connection lost)"),
    (ExitCode.METRICS_UNREACHABLE, "top: /metrics endpoint unreachable or HTTP error"),
    (ExitCode.METRICS_MALFORMED, "top: answer is not Prometheus text, or over --max-bytes"),
    (ExitCode.LOCK_INVALID, "lock file missing, unreadable or invalid"),
    (ExitCode.LOCK_INCOMPATIBLE, "lock file format version or settings incompatible"),
    (ExitCode.WRITE_FAILED, "lock file could not be written (nothing was changed)"),
    (ExitCode.INTERNAL, "internal error (a bug: please report it)"),
    (ExitCode.INTERRUPTED, "interrupted"),
)


class CliError(Exception):
    """A failure to report as one line, with the exit code that classifies it."""

    def __init__(self, code: ExitCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
