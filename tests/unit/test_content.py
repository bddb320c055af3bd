# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Content classification: what each generated corpus kind is classified as, bounded cost."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import content
from opentelemetry.instrumentation.mcp_tokens.engine.content import SAMPLE_CHARS, ContentType, classify

from tests.unit import estimate_corpus


@pytest.fixture(scope="module")
def kinds() -> dict[str, Counter[ContentType]]:
    docs = estimate_corpus.corpus(estimate_corpus.VALIDATION)
    return {kind: Counter(classify(text) for text in texts) for kind, texts in docs.items()}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("json_compact", ContentType.JSON),
        ("json_indented", ContentType.JSON),
        ("tool_definitions", ContentType.JSON),
        ("prose", ContentType.PROSE),
        ("code", ContentType.CODE),
        ("cjk", ContentType.CJK),
    ],
)
def test_homogeneous_kinds_are_classified_as_what_they_are(
    kind: str, expected: ContentType, kinds: dict[str, Counter[ContentType]]
) -> None:
    assert kinds[kind] == Counter({expected: sum(kinds[kind].values())})


def test_bare_base64_is_base64_and_an_image_block_around_it_is_json(
    kinds: dict[str, Counter[ContentType]],
) -> None:
    assert set(kinds["base64"]) == {ContentType.BASE64, ContentType.JSON}
    assert kinds["base64"][ContentType.BASE64] > kinds["base64"][ContentType.JSON]


def test_minified_code_is_never_prose(kinds: dict[str, Counter[ContentType]]) -> None:
    # The padding detector's long-line check applies to prose only; minified code is one
    # long line by design and must not look like prose.
    assert ContentType.PROSE not in kinds["minified_js"]


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n"])
def test_empty_or_blank_text_is_other(text: str) -> None:
    assert classify(text) is ContentType.OTHER


def test_enum_values_are_stable() -> None:
    assert [t.value for t in ContentType] == ["json", "prose", "code", "cjk", "base64", "other"]


def test_a_long_text_is_classified_from_its_head_and_tail() -> None:
    # 20 MB of indented JSON ending in a newline (what that costs: tests.bench.engine_bounds).
    text = '[{"id": 1, "name": "x"},\n' * 800_000 + "]\n"
    assert len(text) > 1000 * SAMPLE_CHARS
    assert classify(text) is ContentType.JSON


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.one_of(st.characters(exclude_categories=()), st.characters(categories=["Cs"]))))
@example("\ud800{")
@example("[" + "\udfff" * 100 + "]")
def test_never_raises(text: str) -> None:
    assert isinstance(classify(text), ContentType)


MIXED_CHARACTERS = list('azAZ09 \t\n\x0b\x0c\r\x1c\x1f+/=_-{};"é漢\u2003')


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(MIXED_CHARACTERS), max_size=200))
def test_the_ascii_fast_paths_agree_with_the_regular_expressions(text: str) -> None:
    assert content._letters_or_spaces(text) == len(content._LETTER_OR_SPACE.findall(text))
    compact = "".join(text.split())
    if len(compact) >= 64:
        covered = sum(len(m) for m in content._BASE64_RUN.findall(compact))
        if covered >= 0.95 * len(compact):  # the pre-check must never reject what qualifies
            in_alphabet = sum(1 for ch in compact if ch.isascii() and ch.encode() in content._ASCII_BASE64)
            assert in_alphabet >= 0.95 * len(compact)
