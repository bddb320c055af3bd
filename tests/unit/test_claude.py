# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Claude encodings: counts identical to ctok's, the fallback estimate and its error, the guard.

Tests marked `claude` need ctok (the `claude` extra, Python >= 3.12) and run in
`.venv-claude` (`make unit-claude`); elsewhere they skip. ctok's own `tokenize` is the
reference: its length minus the family's message frame is a text's content count.
"""

from __future__ import annotations

import importlib.util
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.config import Settings
from opentelemetry.instrumentation.mcp_tokens.engine import claude as claude_loader
from opentelemetry.instrumentation.mcp_tokens.engine.claude_estimate import ClaudeEstimateTokenizer
from opentelemetry.instrumentation.mcp_tokens.engine.claude_names import (
    claude_version,
    family_of,
    is_claude,
    max_tokens,
)
from opentelemetry.instrumentation.mcp_tokens.engine.estimate import estimate_tokens
from opentelemetry.instrumentation.mcp_tokens.engine.tokenizer import (
    TokenCounter,
    TokenizerSpec,
    load_tokenizer,
)

from tests.corpora import claude as claude_corpus
from tests.unit import estimate_corpus
from tests.unit.tokenizer_corpus import corpus as hostile_corpus

HAS_CTOK = importlib.util.find_spec("ctok") is not None
needs_ctok = pytest.mark.skipif(
    not HAS_CTOK, reason="ctok is not installed (the `claude` extra, Python >= 3.12): make unit-claude"
)
VERSIONS = ("3.0", "4.7", "4.8")

# The characters ctok's rules single out, for generated strings.
_ALPHABET = (
    *"aAbBzZsStTdDmMlLrRvVeE",
    *"0123456789",
    *".,;:!?'\"()[]{}<>-_/\\@#$%^&*=+|~`",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r",
    *claude_corpus.BIDI,
    *claude_corpus.MARKS,
    *claude_corpus.ODD,
    *claude_corpus.NUMERALS,
    *"中文のア한ー々😀👍🏽🇩İẞΣςϴℳⓐⒶéก",
    "e\u0301",
    "\u0e4d\u0e32",
    "\ud800",
    "\u2018",
    "\u2019",
    "\u201c",
    "\u201d",
    "\u201e",
    "Hello",
    "WORLD",
    "It's",
    "don't",
    "x'S",
)


def reference(text: str, version: str) -> int:
    from opentelemetry.instrumentation.mcp_tokens.engine.claude_exact import content_count  # noqa: PLC0415

    return content_count(text, version) if text else 0


@pytest.fixture(scope="module", params=VERSIONS)
def claude(request: pytest.FixtureRequest) -> Any:
    if not HAS_CTOK:
        pytest.skip("ctok is not installed (the `claude` extra, Python >= 3.12): make unit-claude")
    return claude_loader.load_claude(f"claude-{request.param}")


# --- names and loading (run everywhere) -------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("claude", "3.0"),
        ("claude-3", "3.0"),
        ("claude-4.5", "4.5"),
        ("Claude-4.7 ", "4.7"),
        ("claude-4.8", "4.8"),
        ("claude-5", "5.0"),
        ("o200k_base", None),
        ("claude-", None),
        ("claude-4.x", None),
        ("claudette", None),
    ],
)
def test_claude_names(name: str, version: str | None) -> None:
    assert claude_version(name) == version
    assert is_claude(name) is (version is not None)


def test_families_follow_ctoks_routing() -> None:
    assert [family_of(v) for v in ("3.0", "4.6", "4.7", "4.7.1", "4.8", "5.0")] == [
        "v3",
        "v3",
        "v4.7",
        "v4.7",
        "v4.8",
        "v4.8",
    ]
    with pytest.raises(ValueError, match=r"3\.0 or later"):
        family_of("2.1")


def test_without_ctok_a_claude_encoding_is_the_calibrated_estimate(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(claude_loader, "_python_runs_ctok", lambda: False)
    tokenizer = load_tokenizer(TokenizerSpec("claude-4.7"))
    assert isinstance(tokenizer, ClaudeEstimateTokenizer)
    assert (tokenizer.name, tokenizer.exact) == ("claude-4.7", False)
    assert "calibrated on Claude's counts" in caplog.text
    text = "The context window is a budget. " * 50
    counted = TokenCounter(tokenizer).count(text)
    # In Claude 4.7 units, which run well above o200k's on English.
    assert not counted.exact and counted.tokens > 1.3 * estimate_tokens(text)


def test_a_non_claude_name_is_not_loaded_as_claude() -> None:
    with pytest.raises(ValueError, match="not a Claude encoding"):
        claude_loader.load_claude("o200k_base")


# --- exactness ---------------------------------------------------------------------------------
@pytest.mark.claude
@needs_ctok
def test_counts_equal_ctok_on_every_kind_of_text(claude: Any) -> None:
    for seed in (1, 2):
        for kind, text in claude_corpus.texts(seed, 12_000).items():
            assert claude.count(text) == reference(text, claude.version), (kind, seed)


@pytest.mark.claude
@needs_ctok
def test_counts_equal_ctok_on_hostile_strings(claude: Any) -> None:
    for text in hostile_corpus(7, 300):
        assert claude.count(text) == reference(text, claude.version), repr(text[:80])


@pytest.mark.claude
@needs_ctok
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_ALPHABET), max_size=30).map("".join))
def test_counts_equal_ctok_on_generated_strings(claude: Any, text: str) -> None:
    assert claude.count(text) == reference(text, claude.version)


@pytest.mark.claude
@needs_ctok
def test_the_stream_is_ctoks(claude: Any) -> None:
    from ctok.main import _model  # noqa: PLC0415
    from ctok.normalize import stream  # noqa: PLC0415

    model = _model(claude.family)
    decorator = claude._decorator
    for text in [*hostile_corpus(3, 200), *claude_corpus.texts(5, 3_000).values()]:
        assert decorator.stream(text) == stream(text, model), repr(text[:80])


@pytest.mark.claude
@needs_ctok
def test_small_chunks_and_tiny_caches_change_nothing(claude: Any) -> None:
    from opentelemetry.instrumentation.mcp_tokens.engine.claude_exact import ClaudeTokenizer  # noqa: PLC0415

    cramped = ClaudeTokenizer("c", claude.version, cache_entries=8, chunk_chars=16)
    for kind, text in claude_corpus.texts(3, 4_000).items():
        assert cramped.count(text) == claude.count(text), kind
    for text in hostile_corpus(11, 150):
        assert cramped.count(text) == claude.count(text), repr(text[:80])


@pytest.mark.claude
@needs_ctok
@pytest.mark.parametrize("run", ["a", "=", "\n", " ", "中", "\u0301", "ab"])
def test_long_runs_are_shortened_exactly(claude: Any, run: str) -> None:
    threshold = claude._tiler._shortening_threshold()
    for length in (threshold - 1, threshold + 7, threshold + 200):
        text = f"x {run * (length // len(run))} y"
        assert claude.count(text) == reference(text, claude.version), (repr(run), length)


@pytest.mark.claude
@needs_ctok
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_ALPHABET), max_size=40).map("".join))
def test_the_bounds_hold(claude: Any, text: str) -> None:
    counted = claude.count(text)
    assert claude.min_tokens(text) <= counted <= max_tokens(text)


@pytest.mark.claude
@needs_ctok
def test_the_bounds_hold_on_real_text(claude: Any) -> None:
    for kind, text in claude_corpus.texts(4, 8_000).items():
        counted = claude.count(text)
        assert claude.min_tokens(text) <= counted <= max_tokens(text), kind


# --- the work budget ---------------------------------------------------------------------------
@pytest.mark.claude
@needs_ctok
def test_past_the_work_budget_a_text_is_estimated_and_flagged() -> None:
    from opentelemetry.instrumentation.mcp_tokens.engine.claude_exact import ClaudeTokenizer  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.engine.estimate import EstimateInstead  # noqa: PLC0415

    tokenizer = ClaudeTokenizer("claude-4.7", "4.7", miss_budget=50, miss_chars=10**9)
    random_text = " ".join(
        "".join(random.Random(n).choices("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", k=9))
        for n in range(500)
    )
    with pytest.raises(EstimateInstead):
        tokenizer.count(random_text)
    counted = TokenCounter(tokenizer, cache_entries=0).count(random_text)
    assert not counted.exact
    assert counted.tokens == tokenizer.estimate(random_text)
    exact = reference(random_text, "4.7")
    assert abs(counted.tokens - exact) / exact < 0.35
    # What was learned before giving up stays right: a text within the budget is exact.
    assert tokenizer.count("hello world") == reference("hello world", "4.7")


# --- the fallback estimate's error (docs/telemetry.md, "Which tokenizer") ----------------------
# kind: (|aggregate error| %, 90th-percentile per-document |error| %), measured on the
# validation corpus (tests.unit.estimate_fit --encoding claude-4.7 --report, and claude-3),
# with a margin. Measured: see the table in docs/telemetry.md.
ESTIMATE_BOUNDS = {
    "json_compact": (3.5, 5.0),
    "json_indented": (4.0, 7.0),
    "tool_definitions": (4.0, 7.0),
    "prose": (6.0, 9.0),
    "code": (8.5, 10.5),
    "minified_js": (2.0, 5.0),
    "cjk": (6.0, 8.0),
    "base64": (3.0, 4.5),
    "numbers": (3.5, 7.0),
    "mixed": (2.0, 10.0),
}


@pytest.mark.claude
@needs_ctok
@pytest.mark.parametrize("name", ["claude-3", "claude-4.7"])
def test_the_estimate_stays_within_its_documented_error(name: str) -> None:
    from opentelemetry.instrumentation.mcp_tokens.engine.claude_estimate import claude_estimate  # noqa: PLC0415

    exact = claude_loader.load_claude(name)
    estimate = claude_estimate(name)
    for kind, docs in estimate_corpus.corpus(estimate_corpus.VALIDATION).items():
        counts = [(estimate.count(doc), exact.count(doc)) for doc in docs]
        aggregate = 100 * (sum(e for e, _ in counts) - sum(x for _, x in counts)) / sum(x for _, x in counts)
        errors = sorted(abs(100 * (e - x) / x) for e, x in counts)
        aggregate_bound, p90_bound = ESTIMATE_BOUNDS[kind]
        assert abs(aggregate) <= aggregate_bound, (name, kind, aggregate)
        assert errors[int(0.9 * (len(errors) - 1))] <= p90_bound, (name, kind)


# --- the guard ---------------------------------------------------------------------------------
@pytest.mark.claude
@needs_ctok
@pytest.mark.parametrize("where", ["counting service", "this process"])
def test_truncate_at_25000_claude_tokens_delivers_between_90_and_100_percent(where: str) -> None:
    from opentelemetry.instrumentation.mcp_tokens.guard.accountant import Accountant  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.guard.core import Guard, GuardCall  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.guard.policy import Policy  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.guard.remote import RemoteMeasure  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.guard.tokens import GuardTokenizer  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.labels import ServerLabels  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.telemetry import GuardInstruments  # noqa: PLC0415
    from opentelemetry.sdk.metrics import MeterProvider  # noqa: PLC0415

    # The environment holds the suite's own COUNTER_DIR (tests/conftest.py).
    config = Settings.load({"guard": "truncate", "encoding": "claude-4.7"})
    assert config.guard_max_result_tokens == 25_000

    def remote() -> RemoteMeasure:
        measure = RemoteMeasure(config, connect_timeout=60.0, answer_timeout=60.0)
        assert measure.max_token_bytes is None  # Claude's: no bytes bound
        return measure

    tokenizer = GuardTokenizer(
        TokenizerSpec(config.encoding),
        max_bytes=config.max_bytes,
        wait_s=60.0,
        remote=remote if where == "counting service" else None,
    )
    tokenizer.start()
    assert tokenizer.wait(60.0)
    meter = MeterProvider().get_meter("test")
    accountant = Accountant(GuardInstruments(meter), ServerLabels(), lambda assessment: 0, delay_s=0.0)
    guard = Guard(config, Policy.from_settings(config), tokenizer, accountant)
    call = GuardCall(side="server", method="tools/call", tool="dump")
    cut = 0
    for kind, text in claude_corpus.texts(31, 150_000).items():
        result = {"content": [{"type": "text", "text": text}]}
        delivered = guard.check(call, result)
        original = reference(text, "4.7")
        if original <= 25_000:
            assert delivered is result, kind  # untouched, the very same object
            continue
        assert delivered is not result, kind
        tokens = sum(reference(item["text"], "4.7") for item in delivered["content"])
        assert 22_500 <= tokens <= 25_000, (kind, tokens)
        cut += 1
    small = {"content": [{"type": "text", "text": "a small result " * 300}]}
    assert guard.check(call, small) is small
    accountant.stop()
    assert cut >= 10  # most kinds were over the limit and cut


def test_estimates_under_load_are_in_claudes_units_too() -> None:
    from opentelemetry.instrumentation.mcp_tokens.analyst import Analyst, Counters  # noqa: PLC0415
    from opentelemetry.instrumentation.mcp_tokens.engine.estimate import EstimateTokenizer  # noqa: PLC0415

    counters = Counters(EstimateTokenizer())
    counter = Analyst(Settings(encoding="claude-4.7"), counters)._estimator.counter
    assert (counter.name, counter.exact) == ("claude-4.7", False)
    assert Analyst(Settings(), counters)._estimator.counter.name == "estimate"
