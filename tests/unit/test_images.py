# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Image dimensions (checked against Pillow on real files), provider formulas, audio estimates."""

from __future__ import annotations

import base64
import io
import math
import random
import struct
import wave
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.instrumentation.mcp_tokens.engine import images
from opentelemetry.instrumentation.mcp_tokens.engine.images import (
    AUDIO_TOKENS_PER_SECOND,
    FALLBACK_IMAGE_SIZE,
    ImageModel,
    MediaEstimate,
    estimate_audio,
    estimate_image,
    image_size,
    image_size_from_base64,
    image_tokens,
)
from PIL import Image

SIZES = [(1, 1), (2, 3), (3, 2), (17, 31), (255, 257), (640, 480), (1000, 1), (1, 1000), (4097, 3)]
WIDE = (16383, 20)  # the WebP maximum on one side, a thin strip on the other
TALL = (20, 16383)


# --------------------------------------------------------------------------- real images


def encode(img: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **options)
    return out.getvalue()


def noise(size: tuple[int, int], mode: str = "RGB", seed: int = 0) -> Image.Image:
    """A deterministic noisy image, so encoders produce realistic (large) payloads."""
    channels = {"RGB": 3, "RGBA": 4, "L": 1}[mode]
    rng = random.Random(seed)
    return Image.frombytes(mode, size, rng.randbytes(size[0] * size[1] * channels))


def flat(size: tuple[int, int], mode: str = "RGB") -> Image.Image:
    return Image.new(mode, size, {"RGB": (12, 200, 90), "RGBA": (12, 200, 90, 128)}.get(mode, 77))


def big_exif() -> bytes:
    exif = Image.Exif()
    exif[0x010E] = "d" * 60_000  # ImageDescription: a ~60 KB APP1 segment
    return exif.tobytes()


def top_down_bmp(img: Image.Image) -> bytes:
    """A BMP whose rows run top-down (negative height), which Pillow reads but never writes."""
    data = bytearray(encode(img.convert("RGB"), "BMP"))
    offset = int.from_bytes(data[10:14], "little")
    width, height = img.size
    stride = (width * 3 + 3) // 4 * 4
    rows = [data[offset + r * stride : offset + (r + 1) * stride] for r in range(height)]
    data[offset:] = b"".join(reversed(rows))
    data[22:26] = struct.pack("<i", -height)
    return bytes(data)


def os2_core_bmp(size: tuple[int, int]) -> bytes:
    """An OS/2 1.x BMP (12-byte BITMAPCOREHEADER, unsigned 16-bit sides)."""
    width, height = size
    stride = (width * 3 + 3) // 4 * 4
    pixels = bytes(stride * height)
    header = struct.pack("<IHHHH", 12, width, height, 1, 24)
    file_header = b"BM" + struct.pack("<IHHI", 14 + 12 + len(pixels), 0, 0, 14 + 12)
    return file_header + header + pixels


def animated(fmt: str, size: tuple[int, int], **options: Any) -> bytes:
    frames = [noise(size, seed=s) for s in range(3)]
    return encode(frames[0], fmt, save_all=True, append_images=frames[1:], duration=50, **options)


def build_corpus() -> dict[str, bytes]:
    corpus: dict[str, bytes] = {}
    for size in [*SIZES, WIDE, TALL]:
        tag = f"{size[0]}x{size[1]}"
        corpus[f"png-rgb-{tag}"] = encode(flat(size), "PNG")
        corpus[f"jpeg-baseline-{tag}"] = encode(flat(size), "JPEG", quality=85)
        corpus[f"jpeg-progressive-{tag}"] = encode(flat(size), "JPEG", progressive=True)
        corpus[f"gif-{tag}"] = encode(flat(size).convert("P"), "GIF")
        corpus[f"webp-lossy-{tag}"] = encode(flat(size), "WEBP", quality=80)
        corpus[f"webp-lossless-{tag}"] = encode(flat(size), "WEBP", lossless=True)
        corpus[f"webp-alpha-{tag}"] = encode(flat(size, "RGBA"), "WEBP", quality=80)
        corpus[f"bmp-{tag}"] = encode(flat(size), "BMP")
    for mode in ("RGBA", "L", "P", "1", "I;16"):
        corpus[f"png-{mode}-33x47"] = encode(flat((33, 47)).convert(mode), "PNG")
    photo = noise((640, 480))
    corpus["png-noise-640x480"] = encode(photo, "PNG")
    corpus["jpeg-noise-640x480"] = encode(photo, "JPEG", quality=95)
    corpus["jpeg-exif-baseline"] = encode(photo, "JPEG", exif=big_exif())
    corpus["jpeg-exif-progressive"] = encode(photo, "JPEG", exif=big_exif(), progressive=True)
    corpus["jpeg-icc-200k"] = encode(photo, "JPEG", icc_profile=random.Random(1).randbytes(200_000))
    corpus["jpeg-gray"] = encode(photo.convert("L"), "JPEG")
    corpus["jpeg-cmyk"] = encode(photo.convert("CMYK"), "JPEG")
    corpus["jpeg-optimized-420"] = encode(photo, "JPEG", optimize=True, subsampling=2)
    corpus["gif-animated"] = animated("GIF", (123, 45))
    corpus["webp-animated"] = animated("WEBP", (123, 45))
    corpus["webp-exif"] = encode(photo, "WEBP", exif=big_exif())
    corpus["webp-lossless-alpha"] = encode(noise((99, 77), "RGBA"), "WEBP", lossless=True)
    corpus["bmp-palette"] = encode(photo.convert("P"), "BMP")
    corpus["bmp-1bit"] = encode(photo.convert("1"), "BMP")
    corpus["bmp-rgba"] = encode(noise((31, 17), "RGBA"), "BMP")
    corpus["bmp-top-down"] = top_down_bmp(noise((37, 23)))
    corpus["bmp-top-down-1x1"] = top_down_bmp(flat((1, 1)))
    corpus["bmp-os2-core"] = os2_core_bmp((65, 33))
    return corpus


CORPUS = build_corpus()


def pillow_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as img:
        return img.size


def urlsafe_unpadded(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def mime_wrapped(data: bytes) -> str:
    return base64.encodebytes(data).decode()  # 76-character lines, "\n"


def crlf_wrapped(data: bytes) -> str:
    text = base64.b64encode(data).decode()
    return "\r\n".join(text[i : i + 64] for i in range(0, len(text), 64)) + "\r\n"


def data_url(data: bytes) -> str:
    return "data:image/whatever;base64," + base64.b64encode(data).decode()


ENCODINGS: dict[str, Callable[[bytes], str]] = {
    "standard": lambda data: base64.b64encode(data).decode(),
    "urlsafe-unpadded": urlsafe_unpadded,
    "mime-76-lf": mime_wrapped,
    "pem-64-crlf": crlf_wrapped,
    "data-url": data_url,
}


def test_corpus_covers_every_container_variant() -> None:
    """The corpus really holds the variants the reader must handle (not just their names)."""
    webp_chunks = {data[12:16] for name, data in CORPUS.items() if name.startswith("webp")}
    assert webp_chunks == {b"VP8 ", b"VP8L", b"VP8X"}
    assert CORPUS["jpeg-exif-baseline"].find(b"\xff\xc0") > 60_000
    assert CORPUS["jpeg-exif-progressive"].find(b"\xff\xc2") > 60_000
    assert CORPUS["jpeg-icc-200k"].count(b"\xff\xe2\xff\xffICC_PROFILE") >= 3  # split over APP2s
    assert CORPUS["jpeg-progressive-17x31"].find(b"\xff\xc2") > 0
    assert struct.unpack_from("<i", CORPUS["bmp-top-down"], 22)[0] == -23
    with Image.open(io.BytesIO(CORPUS["gif-animated"])) as gif:
        assert gif.n_frames == 3
    with Image.open(io.BytesIO(CORPUS["bmp-top-down"])) as top_down:
        assert top_down.getpixel((0, 0)) == noise((37, 23)).getpixel((0, 0))
    assert len(CORPUS) >= 100


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_size_from_bytes_matches_pillow(name: str) -> None:
    data = CORPUS[name]
    assert image_size(data) == pillow_size(data)
    assert image_size(bytearray(data)) == pillow_size(data)
    assert image_size(memoryview(data)) == pillow_size(data)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_size_from_base64_matches_pillow(name: str, encoding: str) -> None:
    data = CORPUS[name]
    assert image_size_from_base64(ENCODINGS[encoding](data)) == pillow_size(data)


@pytest.mark.parametrize("name", ["jpeg-exif-progressive", "jpeg-icc-200k", "png-noise-640x480"])
def test_irregular_whitespace_is_read_through_a_bounded_prefix(name: str) -> None:
    data = CORPUS[name]
    chars = list(base64.b64encode(data).decode())
    rng = random.Random(7)
    for _ in range(300):
        chars.insert(rng.randrange(len(chars)), rng.choice(" \t\r\n"))
    assert image_size_from_base64("".join(chars)) == pillow_size(data)


def test_stray_blank_inside_a_wrapped_row_is_not_misdecoded() -> None:
    data = random.Random(4).randbytes(3_000)
    lines = mime_wrapped(data).split("\n")
    lines[5] = lines[5][:3] + " " + lines[5][3:]  # row 5 now has a blank before col 40
    source = images._Base64Source("\n".join(lines))
    offset = 5 * 57 + 30  # 57 bytes per 76-char row: a window inside row 5
    assert source.read(offset, 6) == data[offset : offset + 6]


def test_truncated_base64_still_yields_the_header() -> None:
    data = CORPUS["png-rgb-17x31"]
    text = base64.b64encode(data).decode()
    for cut in range(32, 80):  # 32 chars = 24 bytes: the end of IHDR's width and height
        assert image_size_from_base64(text[:cut]) == (17, 31), cut


def test_jpeg_fill_bytes_before_a_marker_are_skipped() -> None:
    data = CORPUS["jpeg-exif-baseline"]
    sof = data.find(b"\xff\xc0")
    padded = data[:sof] + b"\xff" * 7 + data[sof:]
    assert image_size(padded) == pillow_size(padded) == (640, 480)
    assert image_size_from_base64(mime_wrapped(padded)) == (640, 480)


def test_truncated_jpeg_is_unreadable_rather_than_wrong() -> None:
    data = CORPUS["jpeg-exif-baseline"]
    sof = data.find(b"\xff\xc0")
    assert image_size(data[: sof + 8]) is None  # frame header cut short
    assert image_size(data[: sof + 9]) == pillow_size(data)
    assert image_size_from_base64(base64.b64encode(data[:4096]).decode()) is None


def test_unknown_or_non_image_input_gives_none() -> None:
    assert image_size(b"") is None
    assert image_size(b"%PDF-1.7 not an image") is None
    assert image_size(b"<svg width='10' height='10'/>") is None
    assert image_size_from_base64("") is None
    assert image_size_from_base64("not base64 at all!") is None
    assert image_size_from_base64("====") is None
    anything: Any = None
    assert image_size(anything) is None
    assert image_size_from_base64(anything) is None


# --------------------------------------------------------------------------- hostile input


def assert_valid(result: tuple[int, int] | None) -> None:
    if result is not None:
        width, height = result
        assert isinstance(width, int) and isinstance(height, int)
        assert width > 0 and height > 0


SIGNATURES = [
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
    b"\xff\xd8\xff",
    b"\xff\xd8\xff\xe1\xff\xff",
    b"GIF89a",
    b"RIFF\x00\x00\x00\x00WEBPVP8 ",
    b"RIFF\x00\x00\x00\x00WEBPVP8L",
    b"RIFF\x00\x00\x00\x00WEBPVP8X",
    b"BM",
]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=256))
def test_random_bytes_never_raise(data: bytes) -> None:
    assert_valid(image_size(data))
    assert_valid(image_size_from_base64(base64.b64encode(data).decode()))


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(SIGNATURES), st.binary(max_size=96))
def test_signature_then_random_bytes_never_raise(signature: bytes, rest: bytes) -> None:
    data = signature + rest
    assert_valid(image_size(data))
    assert_valid(image_size_from_base64(urlsafe_unpadded(data)))
    assert_valid(image_size_from_base64(mime_wrapped(data)))


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_raises(text: str) -> None:
    assert_valid(image_size_from_base64(text))
    for model in ImageModel:
        assert estimate_image(text, "image/png", model).tokens >= 0
    assert estimate_audio(text, "audio/wav").tokens >= 0


def test_truncations_and_bit_flips_of_real_images_never_raise() -> None:
    rng = random.Random(2024)
    checked = 0
    for name, data in CORPUS.items():
        head = data[:70_000]  # reaches the frame header of the big-EXIF JPEGs
        cuts = [*range(min(len(head), 64)), *(rng.randrange(len(head) + 1) for _ in range(16))]
        variants = [head[:cut] for cut in cuts]
        for _ in range(48):
            flipped = bytearray(head)
            for _ in range(rng.randint(1, 4)):
                at = rng.randrange(min(len(flipped), 64 if rng.random() < 0.7 else len(flipped)))
                flipped[at] ^= 1 << rng.randrange(8)
            variants.append(bytes(flipped))
        for variant in variants:
            assert_valid(image_size(variant))
            if len(variant) <= 4096 or name.startswith("jpeg-exif"):
                assert_valid(image_size_from_base64(base64.b64encode(variant).decode()))
            checked += 1
    assert checked > 10_000


def test_jpeg_marker_walk_is_bounded() -> None:
    """Tens of thousands of empty segments: the walk gives up, it does not crawl."""
    data = b"\xff\xd8" + b"\xff\xfe\x00\x02" * 50_000 + CORPUS["jpeg-baseline-17x31"][2:]
    assert image_size(data) is None
    fill = b"\xff\xd8" + b"\xff" * 1_000_000
    assert image_size(fill) is None
    assert image_size_from_base64(base64.b64encode(fill).decode()) is None


# --------------------------------------------------------------------------- bounded work


def jpeg_behind_many_app_segments(count: int) -> bytes:
    """A real JPEG whose frame header sits behind `count` full 64 KiB APP15 segments."""
    app = b"\xff\xef\xff\xff" + bytes(0xFFFF - 2)
    small = CORPUS["jpeg-baseline-640x480"]
    return small[:2] + app * count + small[2:]


@pytest.fixture(scope="module")
def big_payloads() -> dict[str, tuple[bytes, str]]:
    side = 2600  # 2600 x 2600 x 3 = 20.3 MB of pixels
    pixels = random.Random(3).randbytes(side * side * 3)
    photo = Image.frombytes("RGB", (side, side), pixels)
    payloads = {
        "bmp": encode(photo, "BMP"),
        "png": encode(photo, "PNG", compress_level=0),
        "jpeg-300-app-segments": jpeg_behind_many_app_segments(300),
    }
    return {name: (data, base64.b64encode(data).decode()) for name, data in payloads.items()}


@pytest.mark.parametrize("name", ["bmp", "png", "jpeg-300-app-segments"])
def test_the_size_of_a_20_mb_base64_image_is_read(
    big_payloads: dict[str, tuple[bytes, str]], name: str
) -> None:
    data, text = big_payloads[name]
    assert len(data) > 19_000_000
    wrapped = mime_wrapped(data)
    expected = pillow_size(data)
    # Read from a few decoded windows (what that costs: tests.bench.engine_bounds).
    assert image_size_from_base64(text) == expected
    assert image_size_from_base64(wrapped) == expected


# --------------------------------------------------------------------------- provider formulas


def test_openai_published_examples() -> None:
    assert image_tokens(1024, 1024, ImageModel.OPENAI) == 765  # 768x768: 4 tiles
    assert image_tokens(2048, 4096, ImageModel.OPENAI) == 1105  # 768x1536: 6 tiles


def test_openai_only_scales_down() -> None:
    assert image_tokens(512, 512, ImageModel.OPENAI) == 85 + 170  # one tile, not upscaled
    assert image_tokens(1, 1, ImageModel.OPENAI) == 255
    assert image_tokens(513, 100, ImageModel.OPENAI) == 85 + 170 * 2
    # beyond the 2048 box and the 768 short side every square costs the same
    assert image_tokens(9000, 9000, ImageModel.OPENAI) == image_tokens(768, 768, ImageModel.OPENAI)


def test_anthropic_published_examples() -> None:
    assert image_tokens(200, 200) == 54
    assert image_tokens(1000, 1000) == 1334
    assert image_tokens(1092, 1092) == 1590


def test_anthropic_downscales_to_the_long_edge_and_area_caps() -> None:
    assert image_tokens(1568, 100) == math.ceil(1568 * 100 / 750)  # at the long-edge cap
    assert image_tokens(3136, 200) == image_tokens(1568, 100)  # halved to fit
    for width, height in [(1568, 1568), (3000, 2000), (8000, 8000), (7999, 4000), (4032, 3024)]:
        assert 1500 < image_tokens(width, height) <= 1600
    assert image_tokens(1, 1) == 1


def test_gemini_small_images_cost_one_tile() -> None:
    assert image_tokens(384, 384, ImageModel.GEMINI) == 258
    assert image_tokens(1, 1, ImageModel.GEMINI) == 258
    assert image_tokens(200, 300, ImageModel.GEMINI) == 258


def test_gemini_crop_units() -> None:
    # short side 385 -> crop unit floor(385 / 1.5) = 256 px: a 2 x 2 grid of tiles
    assert image_tokens(385, 385, ImageModel.GEMINI) == 4 * 258
    # short side 900 -> unit 600: 1600 x 900 is 3 x 2 units
    assert image_tokens(1600, 900, ImageModel.GEMINI) == 6 * 258
    # a thin strip: the unit never drops below 256 px
    assert image_tokens(100, 1000, ImageModel.GEMINI) == 4 * 258


@settings(max_examples=200, deadline=None)
@given(st.integers(1152, 3072), st.integers(1152, 3072))
def test_gemini_large_images_are_plain_768_tiles(width: int, height: int) -> None:
    expected = 258 * math.ceil(width / 768) * math.ceil(height / 768)
    assert image_tokens(width, height, ImageModel.GEMINI) == expected


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2**31 - 1), st.integers(1, 2**31 - 1), st.sampled_from(list(ImageModel)))
def test_every_formula_is_bounded_and_symmetric(width: int, height: int, model: ImageModel) -> None:
    tokens = image_tokens(width, height, model)
    bound = {ImageModel.ANTHROPIC: 1600, ImageModel.OPENAI: 85 + 170 * 8, ImageModel.GEMINI: 258 * 144}
    assert 1 <= tokens <= bound[model]
    assert image_tokens(height, width, model) == tokens  # EXIF rotation cannot change a count


def test_image_tokens_rejects_impossible_dimensions() -> None:
    with pytest.raises(ValueError, match="0x5"):
        image_tokens(0, 5)
    with pytest.raises(ValueError, match="-3x2"):
        image_tokens(-3, 2)


# --------------------------------------------------------------------------- estimates


def test_estimate_image_uses_the_pixels() -> None:
    data = base64.b64encode(CORPUS["png-noise-640x480"]).decode()
    assert estimate_image(data, "image/png") == MediaEstimate(
        tokens=math.ceil(640 * 480 / 750), width=640, height=480, method="anthropic-pixels"
    )
    openai = estimate_image(data, "image/png", ImageModel.OPENAI)
    assert (openai.tokens, openai.method) == (85 + 170 * 2, "openai-tiles")  # 2 x 1 tiles
    gemini = estimate_image(data, None, ImageModel.GEMINI)
    assert (gemini.tokens, gemini.method) == (258 * 4, "gemini-tiles")  # unit 320: 2 x 2


def test_a_mislabelled_image_is_read_by_its_bytes() -> None:
    data = base64.b64encode(CORPUS["gif-17x31"]).decode()
    assert (estimate_image(data, "image/jpeg").width, estimate_image(data, "image/jpeg").height) == (
        17,
        31,
    )


@pytest.mark.parametrize("model", list(ImageModel))
def test_unreadable_image_falls_back_to_the_providers_cap_without_tokenising(
    model: ImageModel,
) -> None:
    expected = image_tokens(*FALLBACK_IMAGE_SIZE[model], model)
    small = base64.b64encode(random.Random(5).randbytes(1_000)).decode()
    large = base64.b64encode(random.Random(6).randbytes(1_000_000)).decode()
    for payload in (small, large, "definitely not base64", "PHN2Zz4="):
        estimate = estimate_image(payload, "image/svg+xml", model)
        assert estimate == MediaEstimate(tokens=expected, method="size-fallback")
    assert {model: image_tokens(*FALLBACK_IMAGE_SIZE[model], model) for model in ImageModel} == {
        ImageModel.ANTHROPIC: 1590,
        ImageModel.OPENAI: 765,
        ImageModel.GEMINI: 1032,
    }


def test_empty_media_costs_nothing() -> None:
    anything: Any = None
    assert estimate_image("", "image/png") == MediaEstimate(0, method="empty")
    assert estimate_image(anything, None) == MediaEstimate(0, method="empty")
    assert estimate_audio("", "audio/wav") == MediaEstimate(0, method="empty")
    assert estimate_audio(anything, None) == MediaEstimate(0, method="empty")


def wav(seconds: float, rate: int, channels: int, width: int) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as writer:
        writer.setnchannels(channels)
        writer.setsampwidth(width)
        writer.setframerate(rate)
        writer.writeframes(bytes(int(seconds * rate) * channels * width))
    return out.getvalue()


def wave_duration(data: bytes) -> float:
    with wave.open(io.BytesIO(data), "rb") as reader:
        return reader.getnframes() / reader.getframerate()


@pytest.mark.parametrize(
    ("seconds", "rate", "channels", "width"),
    [(2.5, 8000, 1, 2), (1.0, 44100, 2, 3), (0.01, 16000, 1, 1), (61.25, 22050, 1, 2)],
)
def test_wav_duration_matches_the_wave_module(seconds: float, rate: int, channels: int, width: int) -> None:
    data = wav(seconds, rate, channels, width)
    for text in (base64.b64encode(data).decode(), mime_wrapped(data), urlsafe_unpadded(data)):
        estimate = estimate_audio(text, "audio/wav")
        assert estimate.method == "wav-duration"
        assert estimate.duration_s == pytest.approx(wave_duration(data))
        assert estimate.tokens == math.ceil(wave_duration(data) * AUDIO_TOKENS_PER_SECOND)


def test_wav_with_extra_chunks_streamed_and_truncated() -> None:
    data = wav(2.0, 8000, 1, 2)  # 32,000 data bytes
    data_at = data.find(b"data")
    listed = data[:data_at] + b"LIST\x05\x00\x00\x00INFOx\x00" + data[data_at:]  # odd chunk: padded
    assert estimate_audio(base64.b64encode(listed).decode(), None).duration_s == pytest.approx(2.0)
    streamed = data[:data_at] + b"data\xff\xff\xff\xff" + data[data_at + 8 :]
    assert estimate_audio(base64.b64encode(streamed).decode(), None).duration_s == pytest.approx(2.0)
    unsized = data[:data_at] + b"data\x00\x00\x00\x00" + data[data_at + 8 :]
    assert estimate_audio(base64.b64encode(unsized).decode(), None).duration_s == pytest.approx(2.0)
    truncated = data[: data_at + 8 + 16_000]
    assert estimate_audio(base64.b64encode(truncated).decode(), None).duration_s == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("head", "mime", "kbps"),
    [
        (b"ID3\x04", "audio/mpeg", 128),
        (b"\xff\xfb\x90", None, 128),
        (b"OggS", "audio/mpeg", 96),  # the bytes outrank the label
        (b"fLaC", None, 800),
        (b"\x1a\x45\xdf\xa3", "audio/webm", 64),
        (b"\x00\x00\x00\x20ftypM4A ", None, 128),
        (b"\x00" * 8, "audio/webm; codecs=opus", 64),
        (b"\x00" * 8, "AUDIO/OGG", 96),
        (b"\x00" * 8, "audio/x-unknown", 128),
        (b"\x00" * 8, None, 128),
    ],
)
def test_other_audio_duration_from_size_at_a_typical_bitrate(
    head: bytes, mime: str | None, kbps: int
) -> None:
    size = 48_000
    data = head + bytes(size - len(head))
    estimate = estimate_audio(base64.b64encode(data).decode(), mime)
    seconds = size * 8 / (kbps * 1000)
    assert estimate.method == "audio-size"
    assert estimate.duration_s == pytest.approx(seconds)
    assert estimate.tokens == math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def test_base64_size_is_exact_for_every_length_and_layout() -> None:
    rng = random.Random(11)
    for length in range(400):
        data = rng.randbytes(length)
        for encoding in ("standard", "urlsafe-unpadded", "mime-76-lf", "pem-64-crlf", "data-url"):
            source = images._Base64Source(ENCODINGS[encoding](data))
            assert source.size == length, (length, encoding)
            assert source.read(0, length) == data, (length, encoding)
