# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Token estimates for image and audio blocks, from pixels and seconds, never from base64.

Base64 runs at about 1.5 characters per token, so tokenising a 130 KB PNG would report
~120k "tokens" for an image a model sees as ~1.5k. We read the width and height from
the image's own header instead (PNG, JPEG, GIF, WebP, BMP; stdlib only, safe on corrupt
data) and apply the provider's published formula. Every result is an estimate.

Reading dimensions straight from base64: 4 characters decode to 3 bytes, so any byte
range maps to an aligned character window and only that window is decoded. A JPEG's
frame header sits behind its APPn segments (EXIF, ICC), so the marker walk decodes a
few characters per segment and jumps the rest (at most 512 segments). MIME-wrapped
input (regular lines, e.g. 76 chars + LF or CRLF) is mapped the same way, each window
checked against the line layout; irregular whitespace falls back to decoding at most
the first 1 MiB of characters. So work does not grow with the image's size. The MIME
type is not trusted: the bytes' signature decides the format. EXIF orientation is
ignored, harmlessly: every formula below is symmetric in width and height. Nothing
here raises on any payload: unreadable input gives ``None``.

Image formulas (``ImageModel``):

- ``anthropic`` (default), Anthropic "Vision" guide (docs.anthropic.com/en/docs/
  build-with-claude/vision): an image whose long edge exceeds 1568 px, or that would
  cost more than ~1,600 tokens, is scaled down keeping its aspect ratio; then
  ``tokens = ceil(w * h / 750)``. We cap the area at 1,600 x 750 = 1.2 MP, which
  reproduces the guide's examples (200x200 -> 54, 1000x1000 -> 1334, 1092x1092 -> 1590).
  The current guide (platform.claude.com) describes 28x28-px patches,
  ``ceil(w/28) * ceil(h/28)``, with a model-specific native resolution (2576 px on the
  newest Opus; 1000x1000 -> 1296); we keep the area rule because it pairs with a
  published cap that does not depend on the model, and past a few hundred pixels it
  is the higher, safer estimate of the two (750 vs 784 px per token).
- ``openai``, OpenAI "Images and vision" guide, calculating costs (GPT-4o, detail
  high/auto): fit within 2048x2048, then scale the shortest side down to 768 px, count
  512-px tiles: ``85 + 170 * tiles`` (1024x1024 -> 765, 2048x4096 -> 1105). Images are
  only ever scaled down: a 512x512 image is one tile (255).
- ``gemini``, Gemini API "Understand and count tokens" (ai.google.dev/gemini-api/docs/
  tokens) for Gemini 2.x: both sides <= 384 px -> 258 tokens; otherwise the image is
  cut into crop units, each scaled to a 768x768 tile of 258 tokens. Our reading of
  the crop unit as Vertex AI's image-understanding page describes it for Gemini 2.0:
  ``floor(min(w, h) / 1.5)``, kept within 256..768 px;
  ``tiles = ceil(w / unit) * ceil(h / unit)``. From a 1152-px short side on, the unit
  is 768 and this equals plain 768-px tiling. Google publishes no pixel
  cap, so we fit images within 3072x3072 first (our safety bound, so one forged
  header cannot claim billions of tokens).

When the dimensions cannot be read (corrupt data, SVG, an unknown format) the estimate
assumes a typical image at the provider's resize cap (method ``size-fallback``):
anthropic 1092x1092 (1590), openai 2048x2048 (765), gemini 1536x1536 (1032).

Audio: ``AUDIO_TOKENS_PER_SECOND`` = 32, the rate the Gemini API publishes (the only
provider that states a fixed rate). A WAV file's duration comes from its RIFF header
(data bytes / byte rate, method ``wav-duration``); other formats' duration is estimated
from the decoded byte size at a typical bitrate for the container or MIME type (method
``audio-size``; see ``TYPICAL_AUDIO_KBPS``).
"""

from __future__ import annotations

import base64
import math
import re
import struct
from enum import Enum
from typing import NamedTuple, Protocol


class ImageModel(str, Enum):
    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    GEMINI = "gemini"


class MediaEstimate(NamedTuple):
    """Tokens an image or audio block costs, with what the estimate was based on."""

    tokens: int
    width: int | None = None
    height: int | None = None
    duration_s: float | None = None
    method: str = ""


class AnthropicPixelRule(NamedTuple):
    """Anthropic's area rule: downscale to the caps, then one token per 750 pixels."""

    max_long_edge: int = 1568
    max_pixels: int = 1_200_000  # the guide's "~1,600 tokens" resize trigger x 750 px
    pixels_per_token: int = 750


class OpenAITileRule(NamedTuple):
    """OpenAI's GPT-4o tile rule for detail high/auto."""

    fit_box: int = 2048
    short_side: int = 768
    tile: int = 512
    base_tokens: int = 85
    tile_tokens: int = 170


class GeminiTileRule(NamedTuple):
    """Gemini 2.x: one tile for small images, else crop units scaled to 768-px tiles."""

    small_edge: int = 384
    tile: int = 768
    min_crop_unit: int = 256
    tile_tokens: int = 258
    max_long_edge: int = 3072  # ours, not Google's: see the module docstring


ANTHROPIC_PIXEL_AREA = AnthropicPixelRule()
OPENAI_GPT4O_TILES = OpenAITileRule()
GEMINI_2_TILES = GeminiTileRule()

FALLBACK_IMAGE_SIZE: dict[ImageModel, tuple[int, int]] = {
    ImageModel.ANTHROPIC: (1092, 1092),
    ImageModel.OPENAI: (2048, 2048),
    ImageModel.GEMINI: (1536, 1536),
}
_METHODS = {
    ImageModel.ANTHROPIC: "anthropic-pixels",
    ImageModel.OPENAI: "openai-tiles",
    ImageModel.GEMINI: "gemini-tiles",
}

AUDIO_TOKENS_PER_SECOND = 32
DEFAULT_AUDIO_KBPS = 128
TYPICAL_AUDIO_KBPS: dict[str, int] = {
    "mpeg": 128,
    "mp3": 128,
    "aac": 128,
    "mp4": 128,
    "m4a": 128,
    "x-m4a": 128,
    "ogg": 96,
    "vorbis": 96,
    "opus": 64,
    "webm": 64,
    "flac": 800,
    "x-flac": 800,
    "wav": 1411,  # 16-bit 44.1 kHz stereo PCM, when the WAV header cannot be read
    "x-wav": 1411,
    "wave": 1411,
    "vnd.wave": 1411,
    "l16": 1411,
    "pcm": 1411,
}

# --------------------------------------------------------------------------- byte sources


class _Source(Protocol):
    def read(self, offset: int, size: int) -> bytes: ...


class _BytesSource:
    __slots__ = ("_data",)

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._data = data

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size <= 0:
            return b""
        return bytes(self._data[offset : offset + size])


_WS_CHARS = " \t\r\n\f\v"
_WHITESPACE = re.compile(r"[ \t\r\n\f\v]")
_ALL_WHITESPACE = re.compile(r"[ \t\r\n\f\v]+")
_URLSAFE_TO_STANDARD = str.maketrans("-_", "+/")
_LAYOUT_PROBE_CHARS = 4096
_EDGE_WHITESPACE_LIMIT = 64
_IRREGULAR_PREFIX_CHARS = 1 << 20  # ~768 KiB decoded: enough for any sane image header


class _Base64Source:
    """Random access to the bytes behind a base64 string, decoding only what is read.

    Logical character k (whitespace removed) lives at raw index
    ``start + (k // line) * (line + sep) + k % line`` when the text is wrapped in lines
    of ``line`` characters; every window is checked against that layout, and a text
    whose whitespace does not follow it is read from a bounded, compacted prefix.
    """

    __slots__ = ("_chars", "_line", "_prefix", "_sep", "_start", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._start = _payload_start(text)
        self._line, self._sep = _line_layout(text, self._start)  # sep: "" when unwrapped
        self._chars = self._count_chars()
        self._prefix: bytes | None = None

    @property
    def size(self) -> int:
        """Decoded byte count implied by the layout (exact for regular layouts)."""
        tail = self._slice(max(0, self._chars - 2), self._chars) or ""
        full, rest = divmod(self._chars - tail.count("="), 4)
        return full * 3 + max(0, rest - 1)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or size <= 0:
            return b""
        if self._prefix is not None:
            return self._prefix[offset : offset + size]
        first_group, end = offset // 3, offset + size
        c0, c1 = first_group * 4, min(-(-end // 3) * 4, self._chars)
        if c0 >= c1:
            return b""
        chars = self._slice(c0, c1)
        if chars is None:
            self._prefix = self._decode_compacted_prefix()
            return self._prefix[offset : offset + size]
        skip = offset - first_group * 3
        return _decode(chars, final=c1 == self._chars)[skip : skip + size]

    def _raw_index(self, k: int) -> int:
        if not self._line:
            return self._start + k
        row, col = divmod(k, self._line)
        return self._start + row * (self._line + len(self._sep)) + col

    def _slice(self, c0: int, c1: int) -> str | None:
        """Logical characters [c0, c1), or None when the text breaks its layout there.

        Every row the window touches must hold no blank up to the window's end and follow
        the exact separator: a stray or missing blank anywhere earlier shifts each later
        row off its expected place, so a shifted window is refused, never misdecoded.
        """
        text, line, sep = self._text, self._line, self._sep
        if not line:
            chars = text[self._start + c0 : self._start + c1]
            return None if _WHITESPACE.search(chars) else chars
        pieces, k = [], c0
        while k < c1:
            row, col = divmod(k, line)
            run = min(c1 - k, line - col)
            at = self._raw_index(k)
            row_start = at - col
            if _WHITESPACE.search(text, row_start, at + run):
                return None
            if row and text[row_start - len(sep) : row_start] != sep:
                return None
            pieces.append(text[at : at + run])
            k += run
        return "".join(pieces)

    def _count_chars(self) -> int:
        text = self._text
        end = len(text)
        floor = max(self._start, end - _EDGE_WHITESPACE_LIMIT)
        while end > floor and text[end - 1] in _WS_CHARS:
            end -= 1
        raw = end - self._start
        if not self._line:
            return raw
        rows, rest = divmod(raw, self._line + len(self._sep))
        return rows * self._line + min(rest, self._line)

    def _decode_compacted_prefix(self) -> bytes:
        raw = self._text[self._start : self._start + _IRREGULAR_PREFIX_CHARS]
        chars = _ALL_WHITESPACE.sub("", raw)
        whole = self._start + _IRREGULAR_PREFIX_CHARS >= len(self._text)
        if not whole:
            chars = chars[: len(chars) // 4 * 4]
        return _decode(chars, final=whole)


def _payload_start(text: str) -> int:
    """Index of the first base64 character: past a ``data:...;base64,`` prefix and blanks."""
    start = 0
    if text.startswith("data:"):
        comma = text.find(",", 0, 256)
        start = comma + 1 if comma > 0 else 0
    limit = min(len(text), start + _EDGE_WHITESPACE_LIMIT)
    while start < limit and text[start] in _WS_CHARS:
        start += 1
    return start


def _line_layout(text: str, start: int) -> tuple[int, str]:
    """(line length, separator) of wrapped base64, or (0, "") when unwrapped."""
    # str.find per character runs in C; a regex over the probe costs ~15x more
    stop = start + _LAYOUT_PROBE_CHARS
    hits = [i for i in (text.find(c, start, stop) for c in _WS_CHARS) if i >= 0]
    if not hits or min(hits) == start:
        return 0, ""
    first = min(hits)
    run = _ALL_WHITESPACE.match(text, first, min(stop, len(text)))
    return first - start, run.group() if run else text[first]


def _decode(chars: str, *, final: bool) -> bytes:
    """Decode a window of base64 (either alphabet); b"" if it is not base64."""
    if "-" in chars or "_" in chars:
        chars = chars.translate(_URLSAFE_TO_STANDARD)
    if final:
        chars = chars.rstrip("=")
        rest = len(chars) % 4
        chars = chars[:-1] if rest == 1 else chars + "=" * ((4 - rest) % 4)
    try:
        return base64.b64decode(chars, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        return b""


# --------------------------------------------------------------------------- dimensions

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_JPEG_MAX_SEGMENTS = 512  # real files reach their frame header within ~20 segments
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset({0x01, *range(0xD0, 0xD9)})  # TEM, RSTn, SOI: no length
_BMP_INFO_HEADERS = frozenset({16, 40, 52, 56, 64, 108, 124})
_HEAD_BYTES = 32


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) read from an image's header; None if the bytes are not readable."""
    if not _is_bytes(data):
        return None
    return _size_from(_BytesSource(data))


def image_size_from_base64(b64: str) -> tuple[int, int] | None:
    """(width, height) of a base64 image, decoding only the windows its header needs."""
    if not _is_text(b64):
        return None
    return _size_from(_Base64Source(b64))


# Payload JSON can put anything where a string belongs; these guards take `object` so the
# type checker keeps them (they are unreachable only for well-typed callers).
def _is_bytes(value: object) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _is_text(value: object) -> bool:
    return isinstance(value, str)


def _size_from(source: _Source) -> tuple[int, int] | None:
    head = source.read(0, _HEAD_BYTES)
    if head.startswith(_PNG_SIGNATURE):
        return _png_size(head)
    if head.startswith(b"\xff\xd8\xff"):
        return _jpeg_size(source)
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return _gif_size(head)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp_size(head)
    if head[:2] == b"BM":
        return _bmp_size(head)
    return None


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _png_size(head: bytes) -> tuple[int, int] | None:
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack_from(">II", head, 16)
    return _positive(width, height)


def _gif_size(head: bytes) -> tuple[int, int] | None:
    if len(head) < 10:
        return None
    width, height = struct.unpack_from("<HH", head, 6)
    return _positive(width, height)


def _webp_size(head: bytes) -> tuple[int, int] | None:
    if len(head) < 30:
        return None
    chunk = head[12:16]
    if chunk == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack_from("<HH", head, 26)
        return _positive(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(head[24:27], "little") + 1
        return width, int.from_bytes(head[27:30], "little") + 1
    return None


def _bmp_size(head: bytes) -> tuple[int, int] | None:
    if len(head) < 26:
        return None
    header_size = int.from_bytes(head[14:18], "little")
    if header_size == 12:  # OS/2 BITMAPCOREHEADER: unsigned 16-bit sides
        width, height = struct.unpack_from("<HH", head, 18)
        return _positive(width, height)
    if header_size in _BMP_INFO_HEADERS:
        width, height = struct.unpack_from("<ii", head, 18)
        return _positive(width, abs(height))  # a negative height means rows run top-down
    return None


def _jpeg_size(source: _Source) -> tuple[int, int] | None:
    """Walk the marker segments to the first frame header (SOFn), skipping APPn unread."""
    pos = 2
    for _ in range(_JPEG_MAX_SEGMENTS):
        marker = source.read(pos, 4)
        if len(marker) < 2 or marker[0] != 0xFF:
            return None
        kind = marker[1]
        if kind == 0xFF:  # fill byte: any number of 0xFF may precede a marker
            pos += 1
            continue
        if kind in _JPEG_STANDALONE:
            pos += 2
            continue
        if kind in (0x00, 0xD9, 0xDA) or len(marker) < 4:  # no frame before scan data/end
            return None
        length = int.from_bytes(marker[2:4], "big")
        if length < 2:
            return None
        if kind in _JPEG_SOF:
            frame = source.read(pos + 5, 4)  # after length(2) and sample precision(1)
            if len(frame) < 4:
                return None
            height, width = struct.unpack(">HH", frame)
            return _positive(width, height)
        pos += 2 + length
    return None


# --------------------------------------------------------------------------- image tokens


def image_tokens(width: int, height: int, model: ImageModel = ImageModel.ANTHROPIC) -> int:
    """Tokens a `width` x `height` image costs under `model`'s published formula."""
    if width <= 0 or height <= 0:
        raise ValueError(f"image dimensions must be positive, got {width}x{height}")
    model = ImageModel(model)
    if model is ImageModel.OPENAI:
        return _openai_tokens(width, height, OPENAI_GPT4O_TILES)
    if model is ImageModel.GEMINI:
        return _gemini_tokens(width, height, GEMINI_2_TILES)
    return _anthropic_tokens(width, height, ANTHROPIC_PIXEL_AREA)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _fit(width: int, height: int, side: int, target: int) -> tuple[int, int]:
    """Scale so that `side` (one of the two) becomes `target`, never below 1 px."""
    return max(1, width * target // side), max(1, height * target // side)


def _anthropic_tokens(width: int, height: int, rule: AnthropicPixelRule) -> int:
    scale = min(
        1.0,
        rule.max_long_edge / max(width, height),
        (rule.max_pixels / (width * height)) ** 0.5,
    )
    if scale < 1.0:
        width, height = max(1, int(width * scale)), max(1, int(height * scale))
    return _ceil_div(width * height, rule.pixels_per_token)


def _openai_tokens(width: int, height: int, rule: OpenAITileRule) -> int:
    if max(width, height) > rule.fit_box:
        width, height = _fit(width, height, max(width, height), rule.fit_box)
    if min(width, height) > rule.short_side:
        width, height = _fit(width, height, min(width, height), rule.short_side)
    tiles = _ceil_div(width, rule.tile) * _ceil_div(height, rule.tile)
    return rule.base_tokens + rule.tile_tokens * tiles


def _gemini_tokens(width: int, height: int, rule: GeminiTileRule) -> int:
    if width <= rule.small_edge and height <= rule.small_edge:
        return rule.tile_tokens
    if max(width, height) > rule.max_long_edge:
        width, height = _fit(width, height, max(width, height), rule.max_long_edge)
    unit = min(max(min(width, height) * 2 // 3, rule.min_crop_unit), rule.tile)
    return rule.tile_tokens * _ceil_div(width, unit) * _ceil_div(height, unit)


def estimate_image(
    b64: str, mime_type: str | None, model: ImageModel = ImageModel.ANTHROPIC
) -> MediaEstimate:
    """Estimate an image block's tokens from its pixel dimensions.

    `mime_type` is informational only: servers mislabel images, so the bytes' own
    signature decides the format.
    """
    model = ImageModel(model)
    if not _is_text(b64) or not b64:
        return MediaEstimate(0, method="empty")
    size = image_size_from_base64(b64)
    if size is None:
        width, height = FALLBACK_IMAGE_SIZE[model]
        return MediaEstimate(image_tokens(width, height, model), method="size-fallback")
    width, height = size
    return MediaEstimate(image_tokens(width, height, model), width, height, method=_METHODS[model])


# --------------------------------------------------------------------------- audio

_WAV_MAX_CHUNKS = 64


def estimate_audio(b64: str, mime_type: str | None) -> MediaEstimate:
    """Estimate an audio block's tokens from its duration (WAV header, else byte size)."""
    if not _is_text(b64) or not b64:
        return MediaEstimate(0, method="empty")
    source = _Base64Source(b64)
    duration = _wav_duration(source)
    method = "wav-duration"
    if duration is None:
        kbps = _typical_kbps(source.read(0, 12), mime_type)
        duration = source.size * 8 / (kbps * 1000)
        method = "audio-size"
    tokens = math.ceil(duration * AUDIO_TOKENS_PER_SECOND)
    return MediaEstimate(tokens, duration_s=duration, method=method)


def _wav_duration(source: _Base64Source) -> float | None:
    """Seconds of a RIFF/WAVE file: data chunk bytes (as far as present) / byte rate."""
    head = source.read(0, 12)
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, byte_rate = 12, 0
    for _ in range(_WAV_MAX_CHUNKS):
        chunk = source.read(pos, 8)
        if len(chunk) < 8:
            return None
        length = int.from_bytes(chunk[4:8], "little")
        if chunk[:4] == b"fmt ":
            fmt = source.read(pos + 8, 12)
            byte_rate = int.from_bytes(fmt[8:12], "little") if len(fmt) == 12 else 0
        elif chunk[:4] == b"data":
            if byte_rate <= 0:
                return None
            # streamed WAVs declare 0 or 0xFFFFFFFF; truncated ones declare too much
            present = max(0, source.size - (pos + 8))
            declared = length if 0 < length < 0xFFFFFFFF else present
            return min(declared, present) / byte_rate
        pos += 8 + length + (length & 1)  # chunks are padded to even sizes
    return None


def _typical_kbps(head: bytes, mime_type: str | None) -> int:
    """Typical bitrate for the container the bytes show, else for the MIME subtype."""
    sniffed = _sniff_audio(head)
    if sniffed:
        return TYPICAL_AUDIO_KBPS[sniffed]
    if isinstance(mime_type, str):
        subtype = mime_type.split(";", 1)[0].rpartition("/")[2].strip().lower()
        return TYPICAL_AUDIO_KBPS.get(subtype, DEFAULT_AUDIO_KBPS)
    return DEFAULT_AUDIO_KBPS


def _sniff_audio(head: bytes) -> str | None:
    if head.startswith(b"ID3") or (len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0):
        return "mpeg"  # MPEG audio frame sync (MP3, ADTS AAC)
    if head.startswith(b"OggS"):
        return "ogg"
    if head.startswith(b"fLaC"):
        return "flac"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    if head[4:8] == b"ftyp":
        return "m4a"
    if head.startswith(b"RIFF") and head[8:12] == b"WAVE":
        return "wav"
    return None
