"""One MCP request/response pair as a patch saw it: the facts handed to the pipeline.

Patches stay thin: they fill an `Exchange` with references to the wire JSON (never
copies, never counted on the caller's path) and submit it; everything else happens on
the analysis worker.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from enum import Enum

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from .activity import ActivityBoard
from .engine.analysis import PayloadKind


class Side(str, Enum):
    CLIENT = semconv.SIDE_CLIENT
    SERVER = semconv.SIDE_SERVER


# Which payloads of an operation a model is shown, and how to read them.
REQUEST_KINDS: dict[str, PayloadKind] = {
    "tools/call": PayloadKind.TOOL_ARGUMENTS,
    "sampling/createMessage": PayloadKind.SAMPLING_REQUEST,
}
RESPONSE_KINDS: dict[str, PayloadKind] = {
    "tools/call": PayloadKind.TOOL_RESULT,
    "tools/list": PayloadKind.TOOL_LIST,
    "resources/read": PayloadKind.RESOURCE,
    "prompts/get": PayloadKind.PROMPT,
    "sampling/createMessage": PayloadKind.SAMPLING_RESULT,
}
# Operations whose tokens enter the agent's context window (sampling runs a separate
# model call, so it is measured but not charged to the budget).
BUDGETED_METHODS = frozenset({"tools/call", "tools/list", "resources/read", "prompts/get"})


# Handing an exchange over is not the end of its response path, and the analysis waits for
# that to be over rather than take the GIL from it: SETTLE_S, plus a time per character,
# after the response completed.
# - A response this process answers still has its transport to cross: the server's
#   transport serialises and writes it (over stdio at the pace its client reads the pipe).
#   100 ms per MB: with mcp 2.3 over stdio a 20 MB call takes about 80 ms per MB end to end.
# - A response this process received (it sent the request), or answered to a peer in this
#   same process (the SDK's in-memory dispatch: no serialising, no pipe), has arrived: what
#   is left is the SDK validating it into typed models, which references the parsed values
#   (microseconds per MB). 10 ms per MB leaves room for an output-schema check.
SETTLE_S = 0.002
SETTLE_CHARS_PER_S = 10e6
ARRIVED_SETTLE_CHARS_PER_S = 100e6
MAX_SETTLE_S = 1.0  # within the worker's deferral budget (worker.MAX_LAG_S)


def settle_seconds(weight: int, crosses_transport: bool = True) -> float:
    """How long a response path of `weight` characters likely goes on after it completed:
    longer while the response still has a transport to cross."""
    rate = SETTLE_CHARS_PER_S if crosses_transport else ARRIVED_SETTLE_CHARS_PER_S
    return min(MAX_SETTLE_S, SETTLE_S + weight / rate)


class InFlight:
    """The MCP operations of this process that started and have not finished yet.

    The analysis worker waits while there are any (see worker.py): an operation in flight
    is an event loop, and often a transport thread, that may need the GIL at any moment,
    and every time the worker takes the GIL from them the call waits. Patches never call this: an
    `Exchange` registers itself when created for an operation that is starting, and leaves
    at `finish()` (or when submitted). One that is never finished stops counting after
    `STALE_S`, so a lost exchange cannot hold the worker back for long.
    """

    STALE_S = 10.0
    # How often a waiting worker looks whether operations are still in flight: every
    # `POLL_S` at first, twice as long after each look that found calls in flight, up to
    # `MAX_POLL_S`. Each look takes the GIL from a call that may be running: in bursts of
    # 1 MB results over stdio (`tests.bench.instrumented --think-ms 0 --sizes "1 MB"`, ten
    # runs on a noisy 2-core machine) the instrumented median was 1.04-1.21 times the
    # uninstrumented one (mean 1.13) with looks every 5 ms, 1.00-1.12 (mean 1.05) with
    # looks 40-50 ms apart.
    POLL_S = 0.005
    MAX_POLL_S = 0.04
    # Bounds memory if exchanges were created and lost faster than they go stale.
    MAX_TRACKED = 10_000

    def __init__(self) -> None:
        # id(exchange) -> time.monotonic() at start; empty when no operation is in flight.
        self._started: dict[int, float] = {}
        # A finished operation's response path goes on for a while (the server writes the
        # response, the client validates it): quiet only from this time.monotonic() on.
        self._settled_at = 0.0
        # The share of a core the helper may take beside calls in flight (cpu.py; the
        # worker reads it from the machine, until then: some).
        self._helper_share = 1.0
        # These three facts for the analysis helper (activity.py), once it has started.
        self._board: ActivityBoard | None = None

    def add(self, exchange: object) -> None:
        if len(self._started) >= self.MAX_TRACKED:
            return
        self._started[id(exchange)] = time.monotonic()
        self._publish()

    def discard(self, exchange: object) -> None:
        if self._started.pop(id(exchange), None) is not None:
            # Before the worker next looks: submit() extends this by the payload's size.
            self.settling(SETTLE_S)

    def settling(self, seconds: float) -> None:
        """A response just completed; its path is likely over in `seconds`."""
        self._settled_at = max(self._settled_at, time.monotonic() + seconds)
        self._publish()

    def set_helper_share(self, share: float) -> None:
        """The helper's share of a core beside calls in flight, for the board."""
        if share != self._helper_share:
            self._helper_share = share
            self._publish()

    def board_fd(self) -> int | None:
        """The descriptor of this process's activity board, for a helper to inherit
        (created on first use; None where there is none)."""
        if self._board is None:
            self._board = ActivityBoard.create()
            self._publish()
        return None if self._board is None else self._board.fileno()

    def _publish(self) -> None:
        board = self._board
        if board is not None:
            try:  # runs on every operation's start and end: never into the caller
                board.publish(len(self._started), self._settled_at, self._helper_share)
            except Exception:
                self._board = None

    def _after_fork_in_child(self) -> None:
        # The mapping is shared with the parent: the child's helper gets a board of its own,
        # and the child lets go of its copies of the parent's (mapping and descriptor).
        board, self._board = self._board, None
        if board is not None:
            board.close()

    def busy(self) -> bool:
        """Whether an operation is in flight (and not stale) or the last one's response
        path is likely still on."""
        if self._started and self._forget_stale():
            return True
        return self._settled_at > time.monotonic()

    def wait_until_quiet(self, timeout: float) -> bool:
        """Wait (without the GIL) until no operation is in flight and the last one's response
        path is likely over, at most `timeout` seconds. An operation that starts while the
        previous one settles (the next call of a burst) is waited for too: the wait ends in
        a quiet moment, not between two calls. Returns whether it waited at all."""
        deadline = time.monotonic() + timeout
        waited = False
        poll = self.POLL_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return waited
            if self._started and self._forget_stale():
                # Polled rather than woken by each operation's end: a wake-up at the end of
                # every call would ask for the GIL right on that call's response path.
                time.sleep(min(remaining, poll))
                poll = min(2 * poll, self.MAX_POLL_S)
                waited = True
                continue
            settling = min(self._settled_at, deadline) - time.monotonic()
            if settling <= 0:
                return waited
            time.sleep(settling)
            waited = True

    def _forget_stale(self) -> bool:
        """Drop operations older than STALE_S; whether any operation is still in flight."""
        cutoff = time.monotonic() - self.STALE_S
        try:
            # Operations are kept in the order they started: unless the oldest is stale,
            # none is, and the worker (which asks at every pause) need not scan them all.
            oldest = next(iter(self._started.values()), None)
            if oldest is not None and oldest >= cutoff:
                return True
            stale = [key for key, started in self._started.items() if started < cutoff]
        except RuntimeError:  # changed by another thread while iterating: look next time
            return True
        for key in stale:
            self._started.pop(key, None)
        if stale:
            self._publish()
        return bool(self._started)


IN_FLIGHT = InFlight()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=IN_FLIGHT._after_fork_in_child)


@dataclass(frozen=True, slots=True)
class BudgetRef:
    """Which budget scope an exchange is charged to."""

    key: str
    context_window: int | None = None


@dataclass(slots=True)
class Exchange:
    side: Side
    method: str
    start_ns: int = field(default_factory=time.time_ns)
    end_ns: int = 0
    request: object = None
    response: object = None
    target: str | None = None
    server_name: str | None = None
    budget: BudgetRef | None = None
    error_type: str | None = None
    span: Span | None = None
    # Whether the worker ends `span` (at `end_ns`) once the analysis is on it.
    end_span: bool = False
    # Semconv attributes for the duration metric (protocol version, transport, ...).
    metric_attributes: dict[str, AttributeValue] = field(default_factory=dict)
    # Which operation-duration histogram applies when it differs from `side`: semconv
    # measures a request on its sender as a client operation, so a server's own
    # sampling/createMessage request is CLIENT here (and the client's answer SERVER).
    operation_side: Side | None = None
    # The peer runs in this process and is handed the response with no transport between
    # them (mcp 2.x's in-memory dispatch).
    in_process: bool = False

    def __post_init__(self) -> None:
        # Created before its response: an operation starts (and is in flight until finish()).
        if not self.end_ns and self.response is None:
            IN_FLIGHT.add(self)

    def finish(self, response: object = None, error_type: str | None = None) -> None:
        self.end_ns = time.time_ns()
        self.response = response
        self.error_type = error_type
        IN_FLIGHT.discard(self)

    @property
    def response_crosses_transport(self) -> bool:
        """Whether the response still travels after it completed here: this process answers
        the request (the operation's server), and its peer is in another process."""
        return (self.operation_side or self.side) is Side.SERVER and not self.in_process

    @property
    def duration_s(self) -> float:
        return max(0, (self.end_ns or time.time_ns()) - self.start_ns) / 1e9

    @property
    def request_kind(self) -> PayloadKind | None:
        return REQUEST_KINDS.get(self.method)

    @property
    def response_kind(self) -> PayloadKind | None:
        return RESPONSE_KINDS.get(self.method) if self.error_type is None or self.response else None
