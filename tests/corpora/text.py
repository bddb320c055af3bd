# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Natural-language text: English prose and markdown, CJK, RTL and Indic scripts, emoji chat.

Words are drawn from committed frequency-ordered word lists (`words/*.txt`) with Zipf
weights, so the text has roughly the character statistics, compressibility and token
density of real prose without shipping any real document.
"""

from __future__ import annotations

import functools
import itertools
import random
from pathlib import Path

WORDS_DIR = Path(__file__).with_name("words")

LRM = "\u200e"
RLM = "\u200f"
ZWJ = "\u200d"
ZWNJ = "\u200c"


@functools.cache
def vocabulary(lang: str) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Words of `lang` in frequency order, with cumulative Zipf weights for `rng.choices`."""
    words = tuple(w for w in (WORDS_DIR / f"{lang}.txt").read_text(encoding="utf-8").splitlines() if w)
    weights = (1.0 / (rank + 2.7) for rank in range(len(words)))
    return words, tuple(itertools.accumulate(weights))


def words(rng: random.Random, lang: str, count: int) -> list[str]:
    vocab, cum = vocabulary(lang)
    return rng.choices(vocab, cum_weights=cum, k=count)


def english_sentence(rng: random.Random, *, low: int = 6, high: int = 24) -> str:
    picked = words(rng, "en", rng.randint(low, high))
    for i in range(1, len(picked) - 1):
        roll = rng.random()
        if roll < 0.08:
            picked[i] += ","
        elif roll < 0.10:
            picked[i] = str(rng.randint(2, 2048))
        elif roll < 0.11:
            picked[i] = f'"{picked[i]}"'
        elif roll < 0.115:
            picked[i] = f"({picked[i]})"
    end = rng.choices(".?!:", weights=(90, 5, 2, 3))[0]
    return " ".join(picked).capitalize() + end


def english_paragraph(rng: random.Random) -> str:
    return " ".join(english_sentence(rng) for _ in range(rng.randint(3, 7)))


def wrap(paragraph: str, width: int) -> str:
    """Hard-wrap at `width` like an email or a man page (cheaper than textwrap on MBs)."""
    lines: list[str] = []
    line: list[str] = []
    used = 0
    for word in paragraph.split(" "):
        if used + len(word) > width and line:
            lines.append(" ".join(line))
            line, used = [], 0
        line.append(word)
        used += len(word) + 1
    lines.append(" ".join(line))
    return "\n".join(lines)


def english_prose(rng: random.Random, chars: int, *, width: int = 0) -> str:
    """Paragraphs separated by blank lines; one line per paragraph unless `width` wraps them."""
    parts: list[str] = []
    total = 0
    while total < chars:
        paragraph = english_paragraph(rng)
        if width:
            paragraph = wrap(paragraph, width)
        parts.append(paragraph)
        total += len(paragraph) + 2
    return "\n\n".join(parts)


def _markdown_table(rng: random.Random) -> str:
    columns = [w.capitalize() for w in words(rng, "en", rng.randint(3, 5))]
    rows = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    for _ in range(rng.randint(3, 12)):
        cells = [rng.choice((str(rng.randint(0, 999)), " ".join(words(rng, "en", 2)))) for _ in columns]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _markdown_list(rng: random.Random) -> str:
    numbered = rng.random() < 0.4
    items = []
    for n in range(1, rng.randint(3, 9)):
        bullet = f"{n}." if numbered else "-"
        items.append(f"{bullet} {english_sentence(rng, low=3, high=12)}")
    return "\n".join(items)


def markdown(rng: random.Random, chars: int) -> str:
    """Headings, paragraphs, lists, tables, code fences and links, as docs and READMEs have."""
    parts = [f"# {' '.join(words(rng, 'en', 4)).title()}"]
    total = 0
    while total < chars:
        kind = rng.random()
        if kind < 0.1:
            block = f"## {' '.join(words(rng, 'en', rng.randint(2, 5))).title()}"
        elif kind < 0.55:
            block = english_paragraph(rng)
        elif kind < 0.75:
            block = _markdown_list(rng)
        elif kind < 0.88:
            block = _markdown_table(rng)
        elif kind < 0.95:
            name = rng.choice(words(rng, "en", 5))
            block = f"```bash\n$ {name} --{rng.choice(words(rng, 'en', 5))} {rng.randint(1, 99)}\n```"
        else:
            w = words(rng, "en", 3)
            block = f"See [{w[0]} {w[1]}](https://docs.example.org/{w[1]}/{w[2]}.html) for details."
        parts.append(block)
        total += len(block) + 2
    return "\n\n".join(parts)


# Hindi uses ZWJ/ZWNJ after a virama to pick half forms; real text has a few of these.
_HINDI_JOINER_WORDS = ("क्\u200dष", "क्\u200cष", "र्\u200dय", "द्\u200dव")
_PUNCT = {
    "ko": (",", "."),
    "fa": ("،", "."),
    "hi": (",", "।"),
    "ar": ("،", "."),
    "he": (",", "."),
    "zh": ("，", "。"),
    "ja": ("、", "。"),
}


def _sentence(rng: random.Random, lang: str) -> str:
    comma, stop = _PUNCT[lang]
    picked = words(rng, lang, rng.randint(5, 16))
    for i in range(1, len(picked) - 1):
        roll = rng.random()
        if roll < 0.1:
            picked[i] += comma
        elif roll < 0.13:
            picked[i] = str(rng.randint(2, 2025))
        elif lang == "hi" and roll < 0.14:
            picked[i] = rng.choice(_HINDI_JOINER_WORDS)
    joiner = "" if lang in ("zh", "ja") else " "
    return joiner.join(picked) + stop


def _rtl_marks(rng: random.Random, sentence: str) -> str:
    # A directional mark pins a Latin term or a number to the right side: legitimate, rare.
    if rng.random() < 0.05:
        term = rng.choice(("API", "JSON", "HTTP/2", "v2.1", "192.168.0.1"))
        return f"{sentence[:-1]} {LRM}{term}{LRM}{sentence[-1]}"
    if rng.random() < 0.03:
        return sentence + RLM
    return sentence


def language_prose(rng: random.Random, lang: str, chars: int) -> str:
    """Paragraphs in `lang` (zh, ja, ko, fa, hi, ar, he)."""
    sep = "" if lang in ("zh", "ja") else " "
    parts: list[str] = []
    total = 0
    while total < chars:
        sentences = [_sentence(rng, lang) for _ in range(rng.randint(3, 7))]
        if lang in ("ar", "he"):
            sentences = [_rtl_marks(rng, s) for s in sentences]
        paragraph = sep.join(sentences)
        parts.append(paragraph)
        total += len(paragraph) + 2
    return "\n\n".join(parts)


_EMOJI = (
    "😀",
    "😂",
    "🎉",
    "🚀",
    "👍",
    "👍🏽",
    "👋🏿",
    "🙏🏻",
    "❤️",
    "☺️",
    "✔️",
    "1️⃣",
    "#️⃣",
    "🇯🇵",
    "🇩🇪",
    "🇧🇷",
    "🇺🇦",
    "🏳️\u200d🌈",
    "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f",  # Scotland
    "🏴\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England
    "🏴\U000e0067\U000e0062\U000e0077\U000e006c\U000e0073\U000e007f",  # Wales
    "👨\u200d👩\u200d👧\u200d👦",
    "👩🏾\u200d💻",
    "🧑\u200d🤝\u200d🧑",
    "👩\u200d❤️\u200d👨",
    "🧔🏻\u200d♂️",
    "🐻\u200d❄️",
)
_NAMES = ("Ana", "Bilal", "Chen", "Dana", "Emeka", "Freya", "Goran", "Hana", "Ines", "Jonas")


def emoji_chat(rng: random.Random, messages: int) -> str:
    """A chat export: short messages with emoji, ZWJ sequences, flags and skin tones."""
    lines = []
    for n in range(messages):
        text = english_sentence(rng, low=2, high=14)
        reactions = "".join(rng.choices(_EMOJI, k=rng.randint(0, 4)))
        if rng.random() < 0.3:
            text = f"{rng.choice(_EMOJI)} {text}"
        stamp = f"{9 + n * 7 // max(messages, 1):02d}:{rng.randint(0, 59):02d}"
        lines.append(f"[{stamp}] {rng.choice(_NAMES)}: {text} {reactions}".rstrip())
    return "\n".join(lines)


def emoji_reactions(rng: random.Random, count: int) -> str:
    """Nothing but emoji, e.g. a reactions summary: the densest legitimate ZWJ use."""
    return " ".join(f"{rng.choice(_EMOJI)}×{rng.randint(1, 40)}" for _ in range(count))
