# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""The analysis side: what one exchange's payloads are worth, in tokens.

An `Analyst` owns what the analysis of one client keeps between its exchanges: the
analyzers, the bounded label folders and the budget-scope ledgers; the tokenizer is the
process's (`Counters`), shared by every client a counting process serves. It turns a
`Job` (the facts of one finished exchange, without its span) and the exchange's wire
payloads into `Findings`: tokens, overhead, risk and padding per payload, the folded
label values, the budget snapshot. Findings are small
and bounded whatever the payloads held (no per-block detail, at most one definition
entry per label value), because the instrumented process reads them on its own time.

It runs in the counting service (counting/), where it shares no GIL with the application,
or, where no service can run, on a thread of the application.
Nothing here imports the MCP SDK or the OpenTelemetry SDK.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import semconv
from .config import Settings
from .engine.analysis import Analysis, Analyzer, AnalyzerOptions, PayloadKind, payload_texts
from .engine.claude_estimate import claude_estimate
from .engine.claude_names import is_claude
from .engine.compact import compact_json
from .engine.estimate import EstimateTokenizer
from .engine.hosts import HOSTS, ResultSize, crossed_result_limits, text_size, token_encodings
from .engine.ledger import BudgetLedger, BudgetSnapshot
from .engine.tokenizer import TokenCounter, Tokenizer, TokenizerLoader, TokenizerSpec
from .labels import LabelFolder, ServerLabels, SharedListings, clean_text

if TYPE_CHECKING:
    from .exchange import Exchange

_logger = logging.getLogger(__name__)


# Not slotted, as `Findings`: it crosses for every exchange.
@dataclass(frozen=True)
class Job:
    """One finished exchange, as the analysis needs it (the span stays behind). Plain
    values only: the counting service unpickles it with an allow-list (counting/protocol.py)."""

    seq: int
    side: str  # semconv.SIDE_CLIENT or SIDE_SERVER
    method: str
    target: str | None
    server_name: str | None
    error_type: str | None
    end_ns: int
    request_kind: PayloadKind | None
    response_kind: PayloadKind | None
    # The budget scope charged (budgeted operations only), and its context window.
    budget_key: str | None = None
    context_window: int | None = None
    # The client is behind (half its queue is waiting): estimate rather than count.
    behind: bool = False


def job_of(exchange: Exchange, seq: int, behind: bool = False) -> Job:
    """The analysis' view of a finished exchange."""
    budget = exchange.charged_budget
    request_kind, response_kind = exchange.request_kind, exchange.response_kind
    return Job(
        seq=seq,
        side=exchange.side.value,
        method=exchange.method,
        target=exchange.target,
        server_name=exchange.server_name,
        error_type=exchange.error_type,
        end_ns=exchange.end_ns,
        request_kind=None if request_kind is None else PayloadKind(request_kind),
        response_kind=None if response_kind is None else PayloadKind(response_kind),
        budget_key=None if budget is None else budget.key,
        context_window=None if budget is None else budget.context_window,
        behind=behind,
    )


# Not slotted: it crosses from the counting service to the application for every exchange,
# and a frozen slotted dataclass unpickles through Python-level __setstate__ (five times slower).
@dataclass(frozen=True)
class Findings:
    """What the analysis learned about one exchange (the answer to `Job` `seq`)."""

    seq: int
    server: str
    target: str
    request: Analysis | None = None
    response: Analysis | None = None
    budget: BudgetSnapshot | None = None
    # tools/list only: definition tokens per (folded) tool label.
    definitions: dict[str, int] | None = None
    # Label values this exchange admitted, in order: (None, server name) or (server label,
    # tool or prompt name); the instrumented process replays them to fold the same way.
    admitted: tuple[tuple[str | None, str], ...] = ()
    # CPU time of the analysis (the counting process's, or the application's in thread mode).
    analysis_s: float = 0.0
    # Estimated rather than counted because the analysis was behind.
    backlog: bool = False
    # Opt-in content capture: the compact JSON of the request and the response, truncated.
    content: tuple[str | None, str | None] = (None, None)
    # Why the analysis failed (the exchange is then counted as skipped).
    error: str | None = None
    # (host, limit kind) of each chosen host's result limit the response crossed
    # (settings.hosts; measured in the host's own unit, engine/hosts.py).
    host_limits: tuple[tuple[str, str], ...] = ()
    # tools/list only: how many tools the listing holds (no label folding).
    tool_count: int | None = None


@dataclass(frozen=True, slots=True)
class AnalystStatus:
    """Sent once the tokenizer is loaded (or failed to load and fell back to the estimate)."""

    encoding: str
    exact: bool
    error: str | None
    loaded_ns: int


def _no_pause() -> None:
    return None


# The responses hosts cap: tool results and resource reads.
_RESULT_KINDS = (PayloadKind.TOOL_RESULT, PayloadKind.RESOURCE)


class Counters:
    """The exact tokenizer and the estimate that every `Analyst` of a process counts with
    (one tokenizer, however many clients a counting process serves), and the tokenizers of
    hosts whose unit differs (loaded here the first time a client's HOSTS needs one)."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        error: str | None = None,
        threads: int | None = None,
        chunk_chars: int = 1 << 20,
        pause: Callable[[], None] = _no_pause,
    ) -> None:
        self.tokenizer = tokenizer
        self.status = AnalystStatus(tokenizer.name, tokenizer.exact, error, time.time_ns())
        self._threads = threads
        self._chunk_chars = chunk_chars
        self._pause = pause
        self._exact: dict[int, TokenCounter] = {}
        self._estimates: dict[tuple[int, str | None], TokenCounter] = {}
        self._hosts: dict[tuple[str, int], TokenCounter] = {}

    @classmethod
    def load(cls, spec: TokenizerSpec, **options: Any) -> Counters:
        """Load the tokenizer here and now (a counting process, before it forks)."""
        loader = TokenizerLoader(spec)
        loader.run()
        return cls(loader.tokenizer(), error=loader.error, **options)

    @classmethod
    def from_loader(cls, loader: TokenizerLoader, **options: Any) -> Counters:
        """The counters once `loader` has loaded (waits for it)."""
        return cls(loader.tokenizer(), error=loader.error, **options)

    def exact(self, max_bytes: int) -> TokenCounter:
        counter = self._exact.get(max_bytes)
        if counter is None:
            counter = self._exact[max_bytes] = TokenCounter(
                self.tokenizer,
                max_bytes=max_bytes,
                threads=self._threads,
                chunk_chars=self._chunk_chars,
                pause=self._pause,
            )
        return counter

    def estimate(self, max_bytes: int, claude: str | None = None) -> TokenCounter:
        """For payloads exact counting is too far behind on: the content-aware estimate
        costs a small fraction of tokenizing (engine/estimate.py), in Claude's units for a
        `claude` encoding (engine/claude_estimate.py). No cache: an estimate costs about
        what a lookup does."""
        counter = self._estimates.get((max_bytes, claude))
        if counter is None:
            estimate = EstimateTokenizer() if claude is None else claude_estimate(claude)
            counter = self._estimates[max_bytes, claude] = TokenCounter(
                estimate, max_bytes=max_bytes, threads=1, cache_entries=0
            )
        return counter

    def host(self, encoding: str, max_bytes: int) -> TokenCounter:
        """A counter in a host's tokenizer (a bundled encoding or a Claude one), loaded on
        first use: the only tokenizer load after a counting process starts."""
        counter = self._hosts.get((encoding, max_bytes))
        if counter is None:
            loader = TokenizerLoader(TokenizerSpec(encoding))
            loader.run()
            counter = self._hosts[encoding, max_bytes] = TokenCounter(
                loader.tokenizer(), max_bytes=max_bytes, threads=1, pause=self._pause
            )
        return counter


class Analyst:
    """One client's analysis: its settings, label folders and budget ledgers, counting
    with the process's shared `Counters`."""

    def __init__(self, settings: Settings, counters: Counters) -> None:
        self.settings = settings
        self._counters = counters
        # One ledger per side: a process that is both the client and the server of a
        # session (in-memory transports) must not charge one scope twice.
        self.ledgers = {
            side: BudgetLedger(
                context_window=settings.context_window,
                thresholds=settings.budget_thresholds,
                max_scopes=settings.max_scopes,
                idle_ttl=settings.scope_idle_ttl,
            )
            for side in (semconv.SIDE_CLIENT, semconv.SIDE_SERVER)
        }
        self.labels = ServerLabels(settings.max_label_values)
        self._shared_listings = SharedListings()
        options = AnalyzerOptions(
            risk_thresholds=settings.risk_thresholds,
            image_model=settings.image_model,
            overhead_pattern=settings.overhead_pattern,
            detect_padding=settings.padding,
        )
        self._analyzer = Analyzer(counters.exact(settings.max_bytes), options)
        bundled = settings.tokenizer_file is None
        claude = settings.encoding if bundled and is_claude(settings.encoding) else None
        self._estimator = Analyzer(counters.estimate(settings.max_bytes, claude), options)

    @property
    def status(self) -> AnalystStatus:
        return self._counters.status

    # --- one exchange ----------------------------------------------------------------------
    def analyse(self, job: Job, request: object, response: object) -> Findings:
        """Never raises: a failure becomes `Findings.error`."""
        started = time.thread_time()
        try:
            return self._analyse(job, request, response, started)
        except Exception as exc:
            _logger.debug("mcp-tokens could not analyse %s", job.method, exc_info=True)
            return self.failed(job, type(exc).__name__, time.thread_time() - started)

    def failed(self, job: Job, error: str, analysis_s: float = 0.0) -> Findings:
        """The findings of an exchange that could not be analysed."""
        server = self.labels.fold_server(job.server_name)
        return Findings(
            job.seq, server, self.labels.targets(server).fold(job.target), analysis_s=analysis_s, error=error
        )

    def _analyse(self, job: Job, request: object, response: object, started: float) -> Findings:
        backlog = job.behind and self._analyzer.counter.exact
        analyzer = self._estimator if backlog else self._analyzer
        request_analysis = _analyse_part(analyzer, job.request_kind, request)
        response_analysis = _analyse_part(analyzer, job.response_kind, response)
        admitted: list[tuple[str | None, str]] = []
        server = self._server_label(job.server_name, admitted)
        targets = self.labels.targets(server)
        if response_analysis is not None and job.method == "tools/list":
            for name, _ in response_analysis.tool_definitions:
                _admit(targets, server, name, admitted)
        if job.target and job.error_type is None:
            _admit(targets, server, job.target, admitted)
        budget = self._charge_budget(job, job.server_name or server, request_analysis, response_analysis)
        listing = job.method == "tools/list"
        host_limits = self._host_limits_or_none(job, response, backlog)
        return Findings(
            seq=job.seq,
            server=server,
            target=targets.fold(job.target),
            request=_summary(request_analysis),
            response=_summary(response_analysis),
            budget=budget,
            definitions=self._definitions(job, server, response_analysis, targets) if listing else None,
            admitted=tuple(admitted),
            analysis_s=time.thread_time() - started,
            backlog=backlog,
            content=self._content(job, request, response),
            host_limits=host_limits,
            tool_count=response_analysis.block_count if listing and response_analysis is not None else None,
        )

    def _host_limits_or_none(self, job: Job, response: object, backlog: bool) -> tuple[tuple[str, str], ...]:
        """`_host_limits`, or none when a host's tokenizer fails: the exchange's own counts stand."""
        try:
            return self._host_limits(job, response, backlog)
        except Exception:
            _logger.debug("mcp-tokens could not check host limits", exc_info=True)
            return ()

    def _host_limits(self, job: Job, response: object, backlog: bool) -> tuple[tuple[str, str], ...]:
        """The chosen hosts' result limits this response is over. Token limits count the
        response again in the host's tokenizer (its estimate while the analysis is behind)."""
        kind = job.response_kind
        if not self.settings.hosts or response is None or kind not in _RESULT_KINDS:
            return ()
        texts = payload_texts(kind, response)
        chars, size, lines = text_size(texts)
        tokens: dict[str, int] = {}
        for encoding in token_encodings(self.settings.hosts):
            counter = self._host_estimate(encoding) if backlog else self._host_counter(encoding)
            tokens[encoding] = sum(counter.count(text).tokens for text in texts)
        measured = ResultSize(chars, size, lines, tokens)
        return tuple(
            (name, limit.kind)
            for name in self.settings.hosts
            for limit in crossed_result_limits(HOSTS[name], measured)
        )

    def _host_counter(self, encoding: str) -> TokenCounter:
        if encoding == self.settings.encoding and self.settings.tokenizer_file is None:
            return self._analyzer.counter
        return self._counters.host(encoding, self.settings.max_bytes)

    def _host_estimate(self, encoding: str) -> TokenCounter:
        return self._counters.estimate(self.settings.max_bytes, encoding if is_claude(encoding) else None)

    def _definitions(
        self, job: Job, server: str, response: Analysis | None, targets: LabelFolder
    ) -> dict[str, int] | None:
        definitions = _folded_definitions(response, targets)
        if definitions is None or server != semconv.OTHER_VALUE or not job.server_name:
            return definitions
        return self._shared_listings.combine(job.side, job.server_name, definitions)

    def _server_label(self, name: str | None, admitted: list[tuple[str | None, str]]) -> str:
        if name and self.labels.servers.admit(name):
            admitted.append((None, name))
        return self.labels.fold_server(name)

    def _charge_budget(
        self, job: Job, server: str, request: Analysis | None, response: Analysis | None
    ) -> BudgetSnapshot | None:
        key = job.budget_key
        if key is None:
            return None
        ledger = self.ledgers[job.side]
        if job.method == "tools/list" and response is not None:
            return ledger.set_definitions(key, server, response.tokens, context_window=job.context_window)
        tokens = sum(a.tokens for a in (request, response) if a is not None)
        return ledger.add(key, tokens, context_window=job.context_window)

    def _content(self, job: Job, request: object, response: object) -> tuple[str | None, str | None]:
        if not self.settings.capture_content or job.method != "tools/call":
            return (None, None)
        return (self._captured(request), self._captured(response))

    def _captured(self, payload: object) -> str | None:
        if payload is None:
            return None
        try:
            return clean_text(compact_json(payload), self.settings.content_max_chars)
        except (ValueError, TypeError, RecursionError):
            return None


def _admit(folder: LabelFolder, server: str, name: str, admitted: list[tuple[str | None, str]]) -> None:
    if folder.admit(name):
        admitted.append((server, name))


def _analyse_part(analyzer: Analyzer, kind: PayloadKind | None, payload: object) -> Analysis | None:
    if kind is None or payload is None:
        return None
    return analyzer.analyze(kind, payload)


def _summary(analysis: Analysis | None) -> Analysis | None:
    """The analysis without its per-block detail: the telemetry reads totals only."""
    return None if analysis is None else dataclasses.replace(analysis, blocks=())


def _folded_definitions(response: Analysis | None, targets: LabelFolder) -> dict[str, int] | None:
    """Definition tokens per tool label, adding up to the listing's tokens: tools folded into
    `_OTHER`, and those past the analysis' per-block detail (`MAX_BLOCK_DETAIL`) or without a
    name, count there, so the sum over a server's labels is its definition tax."""
    if response is None:
        return None
    definitions: dict[str, int] = {}
    for name, tokens in response.tool_definitions:
        label = targets.fold(name)
        definitions[label] = definitions.get(label, 0) + tokens
    undetailed = response.tokens - sum(definitions.values())
    if undetailed > 0:
        definitions[semconv.OTHER_VALUE] = definitions.get(semconv.OTHER_VALUE, 0) + undetailed
    return definitions
