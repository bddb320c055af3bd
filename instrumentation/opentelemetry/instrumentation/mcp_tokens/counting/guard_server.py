# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The guard's side of the counting service: exact counts and cuts, at normal priority.

The guard decides on the response path, so its questions must not wait behind counting:
the supervisor answers them itself (counter.py's processes run at idle priority). A
question is a GUARD frame, `{"op": "count" | "count_upto" | "prefix", "budget": n,
"max_bytes": n}` as JSON, then the text as PIECE frames and an END; the answer is one
ANSWER frame, `{"value": ...}` or `{"error": ...}`. On connecting, a client is first told
the measure's name and longest token in bytes (`{"name", "max_token_bytes"}`), or
`{"error": "unsupported"}` when the tokenizer cannot cut (the guard then fails open).
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import time
from typing import Any

from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import Tokenizer
from opentelemetry.instrumentation.mcp_tokens.guard.tokens import InexactCount, Measure, measure_of

from . import protocol
from .address import is_own_user


class _Asker:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = protocol.FrameReader()
        self.question: dict[str, Any] | None = None
        self.text: list[bytes] = []
        self.out = bytearray()


class GuardServer:
    def __init__(self, listener: socket.socket, tokenizer: Tokenizer) -> None:
        self._listener = listener
        self._tokenizer = tokenizer
        self._measures: dict[int, Measure | None] = {}
        self._askers: dict[socket.socket, _Asker] = {}
        self.last_activity = time.monotonic()
        # Found before the counting processes fork (the supervisor builds this first): it
        # walks every token, and later would leave garbage all over the shared heap.
        getattr(tokenizer, "max_token_bytes", None)

    @property
    def clients(self) -> int:
        return len(self._askers)

    def register(self, selector: selectors.BaseSelector) -> None:
        self._listener.setblocking(False)
        selector.register(self._listener, selectors.EVENT_READ)

    def close_in_child(self) -> None:
        """In a forked counting process: let go of the supervisor's guard sockets."""
        for sock in (self._listener, *self._askers):
            sock.close()

    def handle(self, selector: selectors.BaseSelector, key: selectors.SelectorKey, events: int) -> None:
        self.last_activity = time.monotonic()
        if key.fileobj is self._listener:
            self._accept(selector)
            return
        asker: _Asker = key.data
        try:
            if events & selectors.EVENT_READ:
                self._read(asker)
            if asker.out:
                del asker.out[: asker.sock.send(asker.out)]
            selector.modify(
                asker.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if asker.out else 0), asker
            )
        except (OSError, ValueError, EOFError):
            self._drop(selector, asker)

    def _accept(self, selector: selectors.BaseSelector) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if not is_own_user(sock):
            sock.close()
            return
        sock.setblocking(False)
        asker = self._askers[sock] = _Asker(sock)
        measure = self._measure(protocol.MAX_FRAME)
        hello = (
            {"error": "unsupported"}
            if measure is None
            else {"name": measure.name, "max_token_bytes": measure.max_token_bytes}
        )
        asker.out += _answer(hello)
        selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, asker)

    def _drop(self, selector: selectors.BaseSelector, asker: _Asker) -> None:
        self._askers.pop(asker.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(asker.sock)
        asker.sock.close()

    def _read(self, asker: _Asker) -> None:
        data = asker.sock.recv(1 << 20)
        if not data:
            raise EOFError("the guard's client left")
        asker.reader.feed(data)
        for kind, body in asker.reader.frames():
            if kind == protocol.GUARD and asker.question is None:
                asker.question = json.loads(body)
            elif kind == protocol.PIECE and asker.question is not None:
                asker.text.append(body)
            elif kind == protocol.END and asker.question is not None:
                text = b"".join(asker.text).decode("utf-8", "surrogatepass")
                asker.out += _answer(self._answer(asker.question, text))
                asker.question, asker.text = None, []
            else:
                raise ValueError(f"unexpected frame {kind!r} from the guard")

    def _answer(self, question: dict[str, Any], text: str) -> dict[str, Any]:
        measure = self._measure(int(question.get("max_bytes", protocol.MAX_FRAME)))
        if measure is None:
            return {"error": "unsupported"}
        budget = int(question.get("budget", 0))
        try:
            op = question.get("op")
            if op == "count":
                return {"value": measure.count(text)}
            if op == "count_upto":
                return {"value": measure.count_upto(text, budget)}
            if op == "prefix":
                return {"value": list(measure.prefix(text, budget))}
        except InexactCount as exc:
            return {"error": "inexact", "detail": str(exc)}
        return {"error": f"unknown question {op!r}"}

    def _measure(self, max_bytes: int) -> Measure | None:
        if max_bytes not in self._measures:
            if len(self._measures) >= 8:  # max_bytes is a client's setting: bound the variety
                self._measures.clear()
            self._measures[max_bytes] = measure_of(self._tokenizer, max_bytes)
        return self._measures[max_bytes]


def _answer(value: dict[str, Any]) -> bytes:
    return protocol.frame(protocol.ANSWER, json.dumps(value).encode())
