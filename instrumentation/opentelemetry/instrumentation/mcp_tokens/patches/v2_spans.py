# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Spans the SDK (or fastmcp) creates and would end itself, kept open until the counts are on.

mcp 2.x ends its own CLIENT and SERVER spans on the response path, before the analysis
worker has counted anything, and attributes set on an ended span are dropped. Two ways
to keep such a span open:

- adopt: where the SDK opens the span through the module-global `otel_span` context
  manager, our replacement opens it with `end_on_exit=False` (same tracer, same name,
  kind, attributes and parent) and hands it over when the block exits;
- defer: where we cannot replace the code that opens it (fastmcp 4's seam span), the
  span instance's `end` is shadowed for one call; when the owner ends it, the span is
  handed over with the time the owner ended it.

Either way a `Handoff` gives the span and its `Exchange` to the pipeline exactly once:
the worker annotates the span and ends it with the original end time. If anything of
ours fails first, the span is ended on the spot, so every span ends exactly once.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from weakref import WeakSet

from opentelemetry.instrumentation.mcp_tokens import semconv
from opentelemetry.instrumentation.mcp_tokens.exchange import Exchange
from opentelemetry.instrumentation.mcp_tokens.pipeline import Pipeline, run_before_end
from opentelemetry.trace import Link, Span, SpanKind
from opentelemetry.util.types import AttributeValue

_logger = logging.getLogger(__name__)


# Server spans some Handoff holds: never adopted or deferred a second time.
_HELD: WeakSet[Span] = WeakSet()


def is_held(span: Span) -> bool:
    try:
        return span in _HELD
    except TypeError:
        return False


def end_quietly(span: Span, end_ns: int | None = None) -> None:
    try:
        span.end(end_time=end_ns or None)
    except Exception:
        _logger.debug("mcp-tokens could not end a span", exc_info=True)


class Handoff:
    """One exchange and the span it annotates, on their way to the pipeline (exactly once).

    `owns_end` says whether the span is ours to end (adopted or deferred): the pipeline
    then ends it. A span we merely observe is annotated, never ended.
    """

    __slots__ = ("_done", "_pipeline", "exchange", "owns_end", "span")

    def __init__(self, pipeline: Pipeline, exchange: Exchange | None) -> None:
        self._pipeline = pipeline
        self.exchange = exchange
        self.span: Span | None = None
        self.owns_end = False
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def attach(self, span: Span, *, owns_end: bool) -> None:
        self.span = span
        self.owns_end = owns_end
        if getattr(span, "kind", None) is SpanKind.SERVER:  # only a server span can be deferred
            try:  # noqa: SIM105  (not contextlib.suppress: on every request)
                _HELD.add(span)
            except TypeError:  # a span type without weak references
                pass

    def submit(self, end_ns: int | None = None) -> None:
        """Give the exchange (and span) to the pipeline; never raises, runs once."""
        if self._done:
            return
        self._done = True
        span, owns_end, exchange = self.span, self.owns_end, self.exchange
        handed = False
        try:
            if exchange is None:
                return
            if end_ns:
                exchange.end_ns = end_ns
            elif not exchange.end_ns:
                exchange.end_ns = time.time_ns()
            exchange.span = span
            exchange.end_span = owns_end and span is not None
            self._pipeline.submit(exchange)
            handed = True
        except Exception:
            _logger.debug("mcp-tokens could not submit an exchange", exc_info=True)
        finally:
            if not handed and owns_end and span is not None:
                if exchange is not None:
                    run_before_end(exchange)
                end_quietly(span, end_ns)

    def before_end(self, annotate: Callable[[], None]) -> None:
        """Run `annotate` just before the span ends: when the pipeline ends it (on the
        worker's thread, off the request's path) if the span is ours to end, else now."""
        if self.owns_end and self.span is not None and self.exchange is not None:
            self.exchange.before_end = annotate
            return
        try:  # never in the way of the submit that follows
            annotate()
        except Exception:
            _logger.debug("mcp-tokens could not annotate a span", exc_info=True)

    def abandon(self, end_ns: int | None = None) -> None:
        """Nothing to report: end the span now if it is ours (used when our own code failed)."""
        if self._done:
            return
        self._done = True
        if self.owns_end and self.span is not None:
            end_quietly(self.span, end_ns)


def defer_end(span: Span, on_end: Callable[[int | None], None]) -> bool:
    """Make the owner's next `span.end(...)` call `on_end(end_time)` instead.

    Returns False (and changes nothing) when the span cannot take an instance attribute
    or is already deferred. `on_end` must end the span (through the pipeline or not).
    """
    try:
        namespace = vars(span)
    except TypeError:
        return False
    if "end" in namespace:
        return False

    def deferred_end(end_time: int | None = None) -> None:
        namespace.pop("end", None)  # later calls reach the class's own `end`
        on_end(end_time if end_time is not None else time.time_ns())

    try:
        namespace["end"] = deferred_end
    except Exception:
        return False
    return True


def cancel_deferral(span: Span) -> None:
    try:
        vars(span).pop("end", None)
    except Exception:
        _logger.debug("mcp-tokens could not restore a span's end", exc_info=True)


def readable_attributes(span: Span) -> Mapping[str, Any]:
    """The attributes an SDK span holds so far (empty for API-only spans)."""
    attributes = getattr(span, "attributes", None)
    return attributes if isinstance(attributes, Mapping) else {}


def is_mcp_server_span(span: Span, method: str) -> bool:
    """Whether `span` is a recording SERVER span of this MCP method (SDK's or fastmcp's)."""
    return (
        span.is_recording()
        and getattr(span, "kind", None) is SpanKind.SERVER
        and readable_attributes(span).get(semconv.MCP_METHOD_NAME) == method
    )


def add_missing(span: Span, attributes: Mapping[str, AttributeValue]) -> None:
    """Set the attributes the span does not carry yet (the SDK's or fastmcp's win)."""
    present = readable_attributes(span)
    if present:
        # A set of the keys first: the SDK's attribute mapping answers `in` by raising and
        # catching KeyError, once for every attribute it lacks.
        keys = set(present)
        missing = {key: value for key, value in attributes.items() if key not in keys}
    else:
        missing = dict(attributes)
    if missing:
        span.set_attributes(missing)


def _nothing(failure: BaseException | None) -> None:
    return None


class Adoption:
    """How one request takes over the span the SDK opens for it (see `adopting_otel_span`)."""

    __slots__ = ("adopt", "exited", "handoff", "links")

    def __init__(
        self,
        handoff: Handoff,
        adopt: Callable[[Span, object], None],
        exited: Callable[[BaseException | None], None] = _nothing,
        links: list[Link] | None = None,
    ) -> None:
        self.handoff = handoff
        # Called with the span and the SDK's attributes once the span is open.
        self.adopt = adopt
        # Called when the SDK's block around the span exits (with what it raised, if anything).
        self.exited = exited
        self.links = links


# Decides, for a span the SDK is about to open, whether a request of ours adopts it.
Claim = Callable[[SpanKind, Any], Adoption | None]


def adopting_otel_span(original: Callable[..., Any], sdk_otel: Any, claim: Claim) -> Callable[..., Any]:
    """A replacement for the SDK's module-global `otel_span` context manager.

    The SDK ends the span it opens there when its block exits, before the analysis has
    counted anything. When `claim(kind, parent)` returns an `Adoption`, the span is opened
    with the same tracer, name, kind, attributes and parent but `end_on_exit=False`, and
    handed to the request's `Handoff`, which ends it later; otherwise `original` runs.
    If adopting fails, the span is ended on the spot, as the SDK would have.
    """

    @contextlib.contextmanager
    def otel_span(
        name: str,
        *,
        kind: SpanKind,
        attributes: dict[str, Any] | None = None,
        context: Any = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> Iterator[Span]:
        tracer = getattr(sdk_otel, "_tracer", None)
        adoption = _safe_claim(claim, kind, context) if tracer is not None else None
        if tracer is None or adoption is None:
            with original(
                name,
                kind=kind,
                attributes=attributes,
                context=context,
                record_exception=record_exception,
                set_status_on_exception=set_status_on_exception,
            ) as sdk_span:
                yield sdk_span
            return
        span: Span | None = None
        failure: BaseException | None = None
        try:
            with tracer.start_as_current_span(
                name,
                kind=kind,
                attributes=attributes,
                context=context,
                links=adoption.links,
                record_exception=record_exception,
                set_status_on_exception=set_status_on_exception,
                end_on_exit=False,
            ) as span:
                _quietly(adoption.adopt, span, attributes)
                yield span
        except BaseException as exc:
            failure = exc
            raise
        finally:
            if span is not None and adoption.handoff.span is not span:
                end_quietly(span)  # our adoption failed: end it as the SDK would have
            else:
                _quietly(adoption.exited, failure)

    return otel_span


def _safe_claim(claim: Claim, kind: SpanKind, context: Any) -> Adoption | None:
    try:
        return claim(kind, context)
    except Exception:
        _logger.debug("mcp-tokens could not claim an SDK span", exc_info=True)
        return None


def _quietly(function: Callable[..., None], *args: Any) -> None:
    try:
        function(*args)
    except Exception:
        _logger.debug("mcp-tokens span bookkeeping failed", exc_info=True)
