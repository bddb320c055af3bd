# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""What kind of text a block holds, judged from a bounded sample.

Tokenizers treat prose, JSON, code, CJK and base64 very differently (3.9 vs 3.1 vs
1.5 characters per token with o200k), so both the fallback estimate and the padding
detectors need to know which one they are looking at. Classification reads at most
`SAMPLE_CHARS` characters so it costs the same for 1 KB and 20 MB.
"""

from __future__ import annotations

import re
from enum import Enum
from itertools import islice

SAMPLE_CHARS = 4096


class ContentType(str, Enum):
    JSON = "json"
    PROSE = "prose"
    CODE = "code"
    CJK = "cjk"
    BASE64 = "base64"
    OTHER = "other"


_BASE64_RUN = re.compile(r"[A-Za-z0-9+/=_-]{64,}")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_CODE_HINTS = re.compile(
    r"(?:[;{}]\s*$|^\s*(?:def|class|import|from|function|const|let|var|return|if|for|while|#include|package|fn|pub)\b"
    r"|=>|\(\)\s*\{|::)",
    re.MULTILINE,
)
_LETTER_OR_SPACE = re.compile(r"[A-Za-z\s]")
# The ASCII characters of those two classes, as bytes to delete: counting them in an ASCII
# sample is then one C pass, not a list of one-character matches (classification runs for
# every text block, so this is per-call cost of the worker).
_ASCII_LETTER_OR_SPACE = bytes(b for b in range(128) if _LETTER_OR_SPACE.match(chr(b)))
_ASCII_BASE64 = bytes(b for b in range(128) if re.fullmatch(r"[A-Za-z0-9+/=_-]", chr(b)))


def classify(text: str) -> ContentType:
    """Classify `text` from its first `SAMPLE_CHARS` characters."""
    sample = text[:SAMPLE_CHARS]
    stripped = sample.lstrip()
    if not stripped:
        return ContentType.OTHER
    # Most tool results are ASCII: no CJK scan for them (it is most of this function's cost).
    cjk = 0 if sample.isascii() else len(_CJK.findall(sample))
    if cjk * 5 >= len(sample):  # a fifth of CJK characters already dominates the token count
        return ContentType.CJK
    # Only the tail is stripped: rstrip() on the whole text would copy all of it.
    if stripped[0] in "{[" and text[-SAMPLE_CHARS:].rstrip()[-1:] in ("}", "]"):
        return ContentType.JSON
    if _looks_like_base64(sample):
        return ContentType.BASE64
    if len(list(islice(_CODE_HINTS.finditer(sample), 3))) >= 3:
        return ContentType.CODE
    if _letters_or_spaces(sample) >= 0.8 * len(sample):
        return ContentType.PROSE
    return ContentType.OTHER


def _letters_or_spaces(sample: str) -> int:
    if sample.isascii():
        return len(sample) - len(sample.encode("ascii").translate(None, _ASCII_LETTER_OR_SPACE))
    return len(_LETTER_OR_SPACE.findall(sample))


def _looks_like_base64(sample: str) -> bool:
    compact = "".join(sample.split())
    if len(compact) < 64:
        return False
    # Runs can cover no more than the alphabet's characters: most texts fail this at once.
    if compact.isascii():
        outside = len(compact.encode("ascii").translate(None, _ASCII_BASE64))
        if len(compact) - outside < 0.95 * len(compact):
            return False
    covered = sum(len(m) for m in _BASE64_RUN.findall(compact))
    if covered < 0.95 * len(compact):
        return False
    # Real base64 mixes cases and digits throughout; long English words do not.
    has_upper = any(c.isupper() for c in compact)
    has_lower = any(c.islower() for c in compact)
    has_digit = any(c.isdigit() for c in compact)
    return has_upper and has_lower and has_digit
