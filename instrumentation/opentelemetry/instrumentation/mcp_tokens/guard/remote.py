# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard's exact counts and cuts, asked of the user's counting service.

The service answers the guard's questions at normal priority (counting/guard_server.py), so
a result on the response path never waits behind counting. One question at a time, each
with a deadline: one not answered in time raises TokenizerUnavailable (the guard fails
open) and the connection is replaced, so a late answer is never taken for the next one's.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.counting import protocol
from opentelemetry.instrumentation.mcp_tokens.counting.address import ServiceUnavailable
from opentelemetry.instrumentation.mcp_tokens.counting.client import connect

from .tokens import InexactCount, TokenizerUnavailable


class RemoteMeasure:
    """What tokens.py's `Measure` answers, asked of the counting service."""

    def __init__(
        self,
        settings: Settings,
        *,
        connect_timeout: float,
        answer_timeout: float,
        piece_bytes: int = 64 << 10,
    ) -> None:
        self._settings = settings
        self._connect_timeout = connect_timeout
        self._timeout = answer_timeout
        self._piece_bytes = piece_bytes
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._reader = protocol.FrameReader()
        self.name = settings.encoding
        self.max_token_bytes: int | None = 1
        self._open()

    def _open(self) -> None:
        self._sock = connect(self._settings, self._connect_timeout, guard=True)
        self._reader = protocol.FrameReader()
        hello = self._read_answer()
        if "error" in hello:
            raise TokenizerUnavailable(f"the guard cannot cut with {self._settings.encoding}")
        self.name = str(hello["name"])
        bound = hello.get("max_token_bytes")
        # None: the tokenizer has no bytes-per-token bound (Claude's), so size decides nothing.
        self.max_token_bytes = None if bound is None else max(1, int(bound))

    def count(self, text: str) -> int:
        return int(self._ask("count", text, 0))

    def count_upto(self, text: str, budget: int) -> int | None:
        if self.max_token_bytes is not None and len(text) > budget * self.max_token_bytes:
            return None  # at least len(text) / max_token_bytes tokens
        value = self._ask("count_upto", text, budget)
        return None if value is None else int(value)

    def prefix(self, text: str, budget: int) -> tuple[int, int]:
        if budget <= 0 or not text:
            return 0, 0
        if self.max_token_bytes is not None:
            # No longer prefix can fit: each token is at most that many bytes.
            text = text[: budget * self.max_token_bytes]
        chars, tokens = self._ask("prefix", text, budget)
        return int(chars), int(tokens)

    def close(self) -> None:
        with self._lock:
            self._drop()

    def _ask(self, op: str, text: str, budget: int) -> Any:
        question = json.dumps({"op": op, "budget": budget, "max_bytes": self._settings.max_bytes}).encode()
        with self._lock:
            try:
                if self._sock is None:
                    self._open()
                assert self._sock is not None
                self._sock.sendall(protocol.frame(protocol.GUARD, question))
                for data in protocol.pieces(text.encode("utf-8", "surrogatepass"), self._piece_bytes):
                    self._sock.sendall(data)
                answer = self._read_answer()
            except (OSError, ValueError, ServiceUnavailable) as exc:
                self._drop()
                raise TokenizerUnavailable(f"the counting service did not answer the guard: {exc}") from None
        if "error" in answer:
            raise InexactCount(str(answer.get("detail") or answer["error"]))
        return answer["value"]

    def _read_answer(self) -> dict[str, Any]:
        assert self._sock is not None
        self._sock.settimeout(self._timeout)
        while (found := self._reader.next_frame()) is None:
            data = self._sock.recv(1 << 16)
            if not data:
                raise ConnectionError("the counting service closed the guard's connection")
            self._reader.feed(data)
        kind, body = found
        answer = json.loads(body)
        if kind != protocol.ANSWER or not isinstance(answer, dict):
            raise ValueError("not an answer")
        return answer

    def _drop(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None
