# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Texts for checking Claude counts against ctok: the kinds MCP results hold, plus the ones
that exercise ctok's rarer rules (bidi controls, combining marks, selectors, literal marker
characters, non-ASCII digits, padding runs long enough to be shortened).

`texts(seed, chars)` makes a fresh set for any seed: tests that must see payloads never seen
before pass a seed chosen at run time.
"""

from __future__ import annotations

import json
import random

from tests.corpora import padding, source, structured, text

BIDI = ("\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069")
MARKS = ("\u0301", "\u0308", "\u05b0", "\u0711", "\ufe0f", "\ufe0e", "\u200d", "\u200c", "\u200b")
ODD = ("\ufdd0", "\ufdd1", "\ufdd3", "\x00", "\x01", "\x7f", "\u00a0", "\u2028", "\u3000", "\ufeff")
NUMERALS = ("١٢٣", "۴۵", "१२३", "²", "½", "①", "１２", "Ⅻ")


def bidi(rng: random.Random, chars: int) -> str:
    """Hebrew and Arabic prose with embedded Latin, numbers and bidi controls."""
    body = text.language_prose(rng, rng.choice(("he", "ar")), chars)
    words = body.split(" ")
    for i in range(0, len(words), 7):
        control = rng.choice(BIDI)
        words[i] = f"{control}{words[i]}\u202c" if control < "\u2066" else f"{control}{words[i]}\u2069"
    return " ".join(words)


def oddities(rng: random.Random, chars: int) -> str:
    """English with combining marks, selectors, literal marker characters and numerals."""
    body = text.english_prose(rng, chars)
    pieces = body.split(" ")
    for i in range(0, len(pieces), 5):
        pieces[i] += rng.choice((*MARKS, *ODD, *NUMERALS))
    return " ".join(pieces)


def texts(seed: int, chars: int) -> dict[str, str]:
    """One text per kind, about `chars` characters each (CJK and padding by characters too)."""
    rng = random.Random(seed)
    records = structured.json_records(rng, max(1, chars // 350))
    adversarial = padding.adversarial_samples()
    return {
        "prose": text.english_prose(rng, chars, width=rng.choice((0, 80))),
        "markdown": text.markdown(rng, chars),
        "code": source.python_module(rng, chars),
        "javascript": source.javascript_module(rng, chars),
        "json_compact": records,
        "json_pretty": json.dumps(json.loads(records), indent=2),
        "tool_listing": structured.tool_listing(rng, max(1, chars // 1500)),
        "log": structured.app_log(rng, max(1, chars // 90)),
        "cjk": text.language_prose(rng, rng.choice(("zh", "ja", "ko")), chars // 2),
        "hindi": text.language_prose(rng, "hi", chars // 2),
        "bidi": bidi(rng, chars),
        "emoji": text.emoji_chat(rng, max(1, chars // 60)),
        "oddities": oddities(rng, chars),
        "padding": rng.choice("abxyzZ.-=0 ") * chars,
        "padding_mixed": adversarial[rng.randrange(len(adversarial))].text[:chars],
        "hex": structured.hex_dump(rng, chars // 4),
    }
