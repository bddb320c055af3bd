# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Per-scope token budgets: how full an agent's context window is getting.

Every tool response, every tool-call argument and the tool definitions a server lists
end up in the model's context window. One large response is caught by the risk tier;
many small ones fill the window just the same, and once it is ~80% full the system
prompt and early conversation are the first to be displaced. The ledger adds up what
each budget scope (a conversation, a ClientSession, a server-side session) has put into
its window and reports the level: ``ok`` below 0.75 of the window, ``warning`` from
0.75, ``critical`` from 0.90 (the defaults).

Scope keys come from peers (W3C baggage, session ids), so the ledger treats them as
hostile: it never raises on any string, caps every key's length, keeps at most
``max_scopes`` scopes (least recently used dropped first) and forgets scopes idle for
``idle_ttl`` seconds. Memory is bounded per scope and in total, whatever is sent.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from typing import NamedTuple

DEFAULT_CONTEXT_WINDOW = 200_000
DEFAULT_MAX_SCOPES = 10_000
DEFAULT_IDLE_TTL = 3600.0

MAX_SCOPE_KEY_CHARS = 256
"""Longer scope keys are replaced by a prefix plus a digest of the whole key."""
MAX_SERVER_KEY_CHARS = 128
"""Longer server names are truncated (server names come from our own peers' listings)."""
MAX_SERVERS_PER_SCOPE = 64
"""Per-scope cap on remembered servers; see `BudgetLedger.set_definitions`."""
MAX_TOKENS = 2**53 - 1
"""Token values and totals saturate here: exact as a float and as an int64 metric."""

_DIGEST_HEX_CHARS = 32  # 128 bits: distinct long keys stay distinct in practice
_DIGEST_MARK = "~sha256:"
_SCOPE_PREFIX_CHARS = MAX_SCOPE_KEY_CHARS - len(_DIGEST_MARK) - _DIGEST_HEX_CHARS
_PURGE_BATCH = 64  # expired scopes dropped per call: bounds one call's cost, outpaces creation


class BudgetLevel(str, Enum):
    OK = "ok"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _LEVELS.index(self)


# Indexed by rank. The hot path reads levels from here: attribute lookups and hashing of
# enum members run Python code in the enum module and cost several times more.
_LEVELS = (BudgetLevel.OK, BudgetLevel.WARNING, BudgetLevel.CRITICAL)


class _Thresholds(NamedTuple):
    warning: float
    critical: float


# A NamedTuple that validates in __new__: immutable and comparable like a frozen dataclass,
# at a fraction of the cost of defining one when the package is imported.
class BudgetThresholds(_Thresholds):
    """Utilisation at or above which a scope is ``warning`` / ``critical``.

    Both are fractions of the context window with ``0 < warning < critical <= 1``.
    ``critical`` may equal but not exceed 1.0: past 1.0 the window has already
    overflowed, so a later alarm would only report the damage; the bound also catches
    percentages given for fractions (``"75,90"``).
    """

    __slots__ = ()

    def __new__(cls, warning: float = 0.75, critical: float = 0.90) -> BudgetThresholds:
        if not 0.0 < warning < critical <= 1.0:
            raise ValueError(
                f"budget thresholds must satisfy 0 < warning < critical <= 1, got "
                f"warning={warning!r}, critical={critical!r}"
            )
        return super().__new__(cls, warning, critical)

    @classmethod
    def parse(cls, text: str) -> BudgetThresholds:
        """Parse ``"0.75,0.90"``; raises ValueError naming the bad input."""
        parts = [part.strip() for part in text.split(",")]
        if len(parts) != 2:
            raise ValueError(f"expected two comma-separated fractions (warning,critical), got {text!r}")
        try:
            warning, critical = (float(part) for part in parts)
        except ValueError:
            raise ValueError(
                f"expected two comma-separated fractions (warning,critical), got {text!r}"
            ) from None
        try:
            return cls(warning, critical)
        except ValueError as error:
            raise ValueError(f"invalid budget thresholds {text!r}: {error}") from None

    def level(self, utilization: float) -> BudgetLevel:
        # NaN compares false everywhere, so it reads as OK rather than raising.
        if utilization >= self.critical:
            return _LEVELS[2]
        if utilization >= self.warning:
            return _LEVELS[1]
        return _LEVELS[0]


DEFAULT_BUDGET_THRESHOLDS = BudgetThresholds()


# A NamedTuple: it crosses from the counting service to the application for every exchange,
# and pickles to half a frozen dataclass's bytes and loads faster.
class BudgetSnapshot(NamedTuple):
    """A scope's budget right after one ledger call.

    ``utilization`` is ``used / context_window`` and exceeds 1.0 once more tokens went
    into the scope than its window holds. ``crossed`` is the highest level this call
    newly reached (``None`` if it reached none); each level is reported at most once per
    scope lifetime, and a jump from ``ok`` straight to ``critical`` reports only
    ``critical``.
    """

    scope: str
    context_window: int
    used: int
    utilization: float
    level: BudgetLevel
    crossed: BudgetLevel | None


def scope_key(scope: object) -> str:
    """The bounded key the ledger stores for `scope`.

    Keys up to `MAX_SCOPE_KEY_CHARS` are kept as given. Longer ones become their first
    characters plus ``~sha256:`` and 32 hex digits of the SHA-256 of the whole key, so
    the form is stable across calls and processes and distinct long keys stay distinct.
    A value that is not a str is keyed by its ``str()`` (or ``""`` if even that fails).
    """
    text = scope if isinstance(scope, str) else _text(scope)
    if len(text) <= MAX_SCOPE_KEY_CHARS:
        return text
    import hashlib  # noqa: PLC0415 -- rarely needed; OpenSSL's load is most of an import's cost

    # surrogatepass: lone surrogates are valid in a str and must hash, not raise.
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{text[:_SCOPE_PREFIX_CHARS]}{_DIGEST_MARK}{digest[:_DIGEST_HEX_CHARS]}"


def server_key(server: object) -> str:
    """`server` cut to `MAX_SERVER_KEY_CHARS` (a non-str is keyed by its ``str()``)."""
    text = server if isinstance(server, str) else _text(server)
    return text[:MAX_SERVER_KEY_CHARS]


def _text(value: object) -> str:
    try:
        return str(value)
    except Exception:
        return ""


def clamp_tokens(value: object) -> int:
    """A token count in ``[0, MAX_TOKENS]``; anything that is not a number counts 0."""
    if type(value) is int and 0 <= value <= MAX_TOKENS:
        return value  # the common case, kept cheap
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        return MAX_TOKENS if value >= MAX_TOKENS else max(0, int(value))
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except Exception:
        return 0
    return min(max(number, 0), MAX_TOKENS)


def _saturate(total: int) -> int:
    # A conditional, not min(): this runs on every call and min() costs several times more.
    return total if total < MAX_TOKENS else MAX_TOKENS


def _window_override(value: object) -> int | None:
    """A usable context window from `value`, or None to keep the scope's window.

    None, non-numbers and values below 1 are ignored; huge values clamp to `MAX_TOKENS`.
    """
    if value is None:
        return None
    window = clamp_tokens(value)
    return window if window >= 1 else None


class _Scope:
    """Mutable state of one scope; only touched under the ledger's lock."""

    __slots__ = ("definitions", "definitions_total", "last_seen", "reported_rank", "spent", "window")

    def __init__(self, window: int, now: float) -> None:
        self.reset(window, now)

    def reset(self, window: int, now: float) -> None:
        self.window = window
        self.spent = 0  # responses + arguments, accumulated
        self.definitions: dict[str, int] | None = None  # latest listing per server, oldest first
        self.definitions_total = 0  # sum of `definitions` plus servers folded out of it
        self.reported_rank = 0
        self.last_seen = now

    @property
    def used(self) -> int:
        return _saturate(self.spent + self.definitions_total)

    def replace_definitions(self, server: str, tokens: int) -> None:
        definitions = self.definitions
        if definitions is None:
            definitions = self.definitions = {}
        previous = definitions.pop(server, None)  # re-inserted below: newest last
        if previous is not None:
            self.definitions_total -= previous
        elif len(definitions) >= MAX_SERVERS_PER_SCOPE:
            # Forget the least recently listed server but keep its tokens counted: they
            # are still in the window. If it lists again it counts again (errs high).
            del definitions[next(iter(definitions))]
        definitions[server] = tokens
        self.definitions_total = _saturate(self.definitions_total + tokens)


class BudgetLedger:
    """Token budgets per scope; thread-safe, bounded in scopes and in memory per scope.

    Every call is O(1) amortised and never raises on a scope or server string, a token
    value or a window override. Scopes are created on first use with ``context_window``
    tokens (a call's own ``context_window`` overrides it for that scope from then on;
    values below 1 are ignored). Past ``max_scopes`` the least recently used scope is
    dropped; a scope untouched for ``idle_ttl`` seconds is dropped lazily (up to 64 per
    call, oldest first). Both count in `evictions`. A dropped scope that comes back
    starts from zero and can report its crossings again.
    """

    def __init__(
        self,
        *,
        context_window: int = DEFAULT_CONTEXT_WINDOW,
        thresholds: BudgetThresholds = DEFAULT_BUDGET_THRESHOLDS,
        max_scopes: int = DEFAULT_MAX_SCOPES,
        idle_ttl: float = DEFAULT_IDLE_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 1 <= context_window <= MAX_TOKENS:
            raise ValueError(f"context_window must be between 1 and {MAX_TOKENS}, got {context_window!r}")
        if max_scopes < 1:
            raise ValueError(f"max_scopes must be at least 1, got {max_scopes!r}")
        if not idle_ttl > 0:
            raise ValueError(f"idle_ttl must be a positive number of seconds, got {idle_ttl!r}")
        self._default_window = context_window
        self._thresholds = thresholds
        self._max_scopes = max_scopes
        self._idle_ttl = idle_ttl
        self._clock = clock
        self._scopes: OrderedDict[str, _Scope] = OrderedDict()  # least recently used first
        self._evictions = 0
        self._no_expiry_before = -math.inf  # a lower bound on the head's expiry time
        self._lock = threading.Lock()

    # Inputs are normalised before taking the lock: hashing a long key is linear in its
    # length, and converting a foreign value may run its code, neither under our lock.

    def open(self, scope: str, *, context_window: int | None = None) -> BudgetSnapshot:
        """Create `scope` or mark it used; a given `context_window` replaces its window."""
        key, window = scope_key(scope), _window_override(context_window)
        with self._lock:
            return self._report(key, self._touch(key, window))

    def add(self, scope: str, tokens: int, *, context_window: int | None = None) -> BudgetSnapshot:
        """Add response or argument tokens to `scope` (they accumulate)."""
        key, count, window = scope_key(scope), clamp_tokens(tokens), _window_override(context_window)
        with self._lock:
            state = self._touch(key, window)
            state.spent = _saturate(state.spent + count)
            return self._report(key, state)

    def set_definitions(
        self, scope: str, server: str, tokens: int, *, context_window: int | None = None
    ) -> BudgetSnapshot:
        """Record `server`'s latest tool definitions: they replace its previous ones.

        A model sees one listing per server, so listing again does not add up; another
        server's listing does. At most `MAX_SERVERS_PER_SCOPE` servers are remembered per
        scope; past that the least recently listed one is forgotten but its tokens stay
        counted (if it lists again it is counted again, so the error is on the high side).
        """
        key, name, count = scope_key(scope), server_key(server), clamp_tokens(tokens)
        window = _window_override(context_window)
        with self._lock:
            state = self._touch(key, window)
            state.replace_definitions(name, count)
            return self._report(key, state)

    def get(self, scope: str) -> BudgetSnapshot | None:
        """`scope`'s budget without touching it (its idle time keeps running); None if absent."""
        key = scope_key(scope)
        with self._lock:
            now = self._clock()
            self._purge_expired(now)
            state = self._live(key, now)
            return None if state is None else self._snapshot(key, state)

    def close(self, scope: str) -> BudgetSnapshot | None:
        """Forget `scope` and return its final budget; None if it was not held."""
        key = scope_key(scope)
        with self._lock:
            now = self._clock()
            self._purge_expired(now)
            state = self._live(key, now)
            if state is None:
                return None
            del self._scopes[key]
            return self._snapshot(key, state)

    def __len__(self) -> int:
        with self._lock:
            self._purge_expired(self._clock())
            return len(self._scopes)

    @property
    def evictions(self) -> int:
        """Scopes dropped because the ledger was full or they sat idle past the TTL."""
        with self._lock:
            return self._evictions

    # -- internals: called with the lock held ------------------------------------------

    def _touch(self, key: str, window: int | None) -> _Scope:
        """Find or create the scope and mark it used now; the LRU tail is the newest."""
        now = self._clock()
        self._purge_expired(now)
        state = self._live(key, now)
        if state is None:
            state = self._new_scope(key, now)
        else:
            self._scopes.move_to_end(key)
            state.last_seen = now
        if window is not None:
            state.window = window
        return state

    def _new_scope(self, key: str, now: float) -> _Scope:
        scopes = self._scopes
        if len(scopes) >= self._max_scopes:
            _, state = scopes.popitem(last=False)
            self._evictions += 1
            state.reset(self._default_window, now)  # reuse: a full ledger churns at no allocation
        else:
            state = _Scope(self._default_window, now)
        scopes[key] = state
        return state

    def _live(self, key: str, now: float) -> _Scope | None:
        """The scope under `key`, dropping it first if it has been idle too long."""
        state = self._scopes.get(key)
        if state is not None and now - state.last_seen > self._idle_ttl:
            del self._scopes[key]
            self._evictions += 1
            return None
        return state

    def _purge_expired(self, now: float) -> None:
        # LRU order is also last-seen order, so expired scopes sit at the head, and no
        # scope can expire before the head does: until then there is nothing to look at.
        if now <= self._no_expiry_before:
            return
        scopes = self._scopes
        for _ in range(_PURGE_BATCH):
            if not scopes:
                self._no_expiry_before = now + self._idle_ttl
                return
            oldest = next(iter(scopes.values()))
            if now - oldest.last_seen <= self._idle_ttl:
                self._no_expiry_before = oldest.last_seen + self._idle_ttl
                return
            scopes.popitem(last=False)
            self._evictions += 1

    def _report(self, key: str, state: _Scope) -> BudgetSnapshot:
        """The snapshot after an update, naming a level the first time the scope reaches it."""
        used = state.used
        utilization = used / state.window
        level = self._thresholds.level(utilization)
        rank = _LEVELS.index(level)
        crossed = None
        if rank > state.reported_rank:
            state.reported_rank = rank
            crossed = level
        return BudgetSnapshot(key, state.window, used, utilization, level, crossed)

    def _snapshot(self, key: str, state: _Scope) -> BudgetSnapshot:
        used = state.used
        utilization = used / state.window
        return BudgetSnapshot(key, state.window, used, utilization, self._thresholds.level(utilization), None)
