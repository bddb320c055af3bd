# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Seeded texts for checking token counts against tiktoken, hostile characters included.

`corpus(seed, count)` mixes JSON (pretty and compact), prose with contractions and CRLF,
code with comments and paths, CJK with full-width punctuation, emoji sequences, whitespace
soup (NBSP, U+2028, \\x85, tabs, runs of newlines next to "/"), and hostile strings (NUL,
BOM, stacked combining marks, lone and split surrogate pairs, special-token text,
unassigned and private-use code points). `BOUNDARY_CHARS` feeds hypothesis strategies
with the characters the chunking rules care about.
"""

from __future__ import annotations

import json
import random
import string
from collections.abc import Callable

_WORD_TEXT = (
    "the token engine counts what a model is shown per content block and in total "
    "tools resources prompts sampling overhead padding budget ledger window risk tier "
    "Überprüfung naïve café résumé Zürich façade São Paulo Ελληνικά кириллица עברית العربية हिन्दी ไทย"
)
WORDS = tuple(_WORD_TEXT.split(" "))
CONTRACTIONS = ("it's", "don't", "we'll", "they're", "I've", "she'd", "I'm", "O'Neil", "rock'n'roll", "'tis")
CJK = (
    "模型上下文协议的令牌经济学。工具定义、资源、提示词，以及采样请求！"
    "日本語のテキストです。한국어 문장입니다。"
)
EMOJI = ("😀", "👍🏽", "👨‍👩‍👧‍👦", "🇩🇪", "🏳️‍🌈", "❤️", "🧑🏿‍💻", "✅", "🔥🔥")
SPACES = (
    " ",
    "  ",
    "\t",
    "\n",
    "\r\n",
    "\r",
    "\n\n",
    "\u00a0",
    "\u2028",
    "\u2029",
    "\x85",
    "\x0b",
    "\x0c",
    "\u3000",
    "\u202f",
    "\u1680",
    " \n ",
    "\n/",
    "\r\n/",
    "\x1c",
    "\x1f",
)
HOSTILE = (
    "\x00",
    "\ufeff",
    "\u200b",
    "\u200d",
    "\u202e",
    "\u0301",
    "e\u0301\u0302\u0303",
    "\ud800",
    "\udfff",
    "\ud83d\ude00",  # a pair as two code points, as json.loads can produce
    "\ud83d",
    "<|endoftext|>",
    "<|endofprompt|>",
    "<|fim_prefix|>",
    "\ue000",
    "\U0010ffff",
    "\u0378",
    "\U00016d43",  # a Unicode 16 letter
    "\u0c5d",
    "'s",
    "'",
    "//",
    "/*",
)
# Characters around which the chunking rules decide: classes, whitespace, "'", "/", marks.
BOUNDARY_CHARS = tuple(
    sorted(
        set(
            "aZé日ä1٣５ !,.;:'\"/\\-_()[]{}<>#@$€+=*&%|~`?"
            "\n\r\t\x0b\x0c\x85\xa0\u2028\u2029\u3000\x1c\x1f"
            "\u0301\u0308\u20dd\x00\ufeff\u200b\ud800\udc00\ud83d\ude00😀，。"
        )
    )
)


def _prose(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(5, 80)):
        word = rng.choice(WORDS) if rng.random() < 0.85 else rng.choice(CONTRACTIONS)
        if rng.random() < 0.1:
            word = word.capitalize() if rng.random() < 0.5 else word.upper()
        if rng.random() < 0.08:
            word += str(rng.randint(0, 10 ** rng.randint(1, 7)))
        parts.append(word + rng.choice(("", "", "", ",", ".", "!", "?", ";", ":", "'s", "—", "...")))
        parts.append(rng.choice((" ", " ", " ", " ", "\n", "\r\n", "  ", "\n\n")))
    return "".join(parts)


def _json(rng: random.Random) -> str:
    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.3:
            return rng.choice(
                [
                    rng.randint(-(10**9), 10**9),
                    rng.random() * 1000,
                    True,
                    None,
                    _prose(rng)[:60],
                    rng.choice(WORDS),
                ]
            )
        if roll < 0.65:
            return {rng.choice(WORDS) + str(i): value(depth + 1) for i in range(rng.randint(0, 5))}
        return [value(depth + 1) for _ in range(rng.randint(0, 5))]

    document = value(0)
    indent = rng.choice((None, None, 2, 4, "\t"))
    separators = (",", ":") if indent is None and rng.random() < 0.5 else None
    return json.dumps(document, indent=indent, separators=separators, ensure_ascii=rng.random() < 0.3)


def _code(rng: random.Random) -> str:
    lines = []
    for _ in range(rng.randint(3, 30)):
        indent = " " * rng.choice((0, 2, 4, 8)) if rng.random() < 0.8 else "\t"
        name = rng.choice(WORDS[:20]) + rng.choice(("", "_id", "2", "Count", "_v3"))
        line = rng.choice(
            (
                f"def {name}(self, x: int = 0) -> str:",
                f"const {name} = await fetch('/api/v1/{name}?q=' + x);",
                f"// TODO: {name} handles the edge cases",
                f"# {name}: see https://example.invalid/docs/{name}.html#L12",
                f"if ({name} >= 0x1F && {name} != null) {{ return {name}[0]; }}",
                f"{name} = {{'key': [{rng.randint(0, 999)}, {rng.random():.3f}], \"k2\": None}}",
                f"path = \"/usr/local/lib/{name}/\" + '\\n'",
                "}",
                "",
            )
        )
        lines.append(indent + line)
    return rng.choice(("\n", "\r\n")).join(lines)


def _cjk(rng: random.Random) -> str:
    start = rng.randrange(len(CJK))
    text = (CJK * 4)[start : start + rng.randint(5, 120)]
    if rng.random() < 0.5:
        text += rng.choice(WORDS) + rng.choice(("。", "，", "！", " ", "\n")) + text[::-1]
    return text


def _emoji(rng: random.Random) -> str:
    return "".join(
        rng.choice(EMOJI) + rng.choice(("", " ", "\n", rng.choice(WORDS))) for _ in range(rng.randint(1, 25))
    )


def _soup(rng: random.Random) -> str:
    alphabet = (*SPACES, *HOSTILE, *WORDS[:10], *EMOJI[:3], "1", "22", "333", "!", "/", ".", "'", "a")
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120)))


def _code_points(rng: random.Random) -> str:
    def one() -> str:
        roll = rng.random()
        if roll < 0.5:
            return chr(rng.randrange(0x20, 0x3000))
        if roll < 0.8:
            return chr(rng.randrange(0x110000))
        return rng.choice(string.printable)

    return "".join(one() for _ in range(rng.randint(0, 200)))


def _mixed(rng: random.Random) -> str:
    makers = (_prose, _json, _code, _cjk, _emoji, _soup)
    return rng.choice(SPACES).join(rng.choice(makers)(rng) for _ in range(rng.randint(2, 5)))


def _identifiers(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + "+/=-_"
    pieces = [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(4, 60))) for _ in range(rng.randint(1, 8))
    ]
    return rng.choice(("", " ", ",", "\n", '","')).join(pieces)


MAKERS: tuple[Callable[[random.Random], str], ...] = (
    _prose,
    _json,
    _code,
    _cjk,
    _emoji,
    _soup,
    _code_points,
    _mixed,
    _identifiers,
)


def corpus(seed: int, count: int) -> list[str]:
    """`count` texts of every kind above, the same for the same seed on every machine."""
    rng = random.Random(seed)
    texts = [MAKERS[i % len(MAKERS)](rng) for i in range(count)]
    return ["", *HOSTILE, *SPACES, *texts]
