# Copyright The mcp-tokens developers
# SPDX-License-Identifier: Apache-2.0

"""Exact, offline token counting: bundled tiktoken encodings, user tokenizer files, fallback.

- `load_bundled_encoding` builds o200k_base or cl100k_base from the rank files shipped in
  `engine/data/`, checked against the sha256 tiktoken publishes for them. It never calls
  `tiktoken.get_encoding`, so nothing is downloaded and no cache is written.
- `load_tokenizer` turns a `TokenizerSpec` into a `Tokenizer`: a bundled encoding, a
  Claude encoding (`claude`, `claude-<version>`: claude.py), a tiktoken BPE file with a
  known family's pattern, or a HuggingFace `tokenizer.json`. When none can load it logs
  one warning and returns the content-aware estimate (`name == "estimate"`, `exact ==
  False`); a Claude encoding falls back to the estimate calibrated on Claude's counts
  (its own name, `exact == False`).
- `TokenizerLoader` does that on a daemon thread, so callers can ask without blocking.
- `TokenCounter` is what the engine counts with: a cache for recurring strings, a size
  cap past which it estimates, exact chunks for long texts, and no exception ever.

Importing this module reads no file and imports neither tiktoken nor tokenizers.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
import logging
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, runtime_checkable

from .cache import CacheInfo, CountCache
from .chunking import compile_cut_patterns, count_in_chunks, default_threads, utf8_size_exceeds
from .claude import ClaudeUnavailable, load_claude
from .claude_estimate import claude_estimate
from .claude_names import is_claude
from .estimate import EstimateInstead, EstimateTokenizer, estimate_tokens

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CacheInfo",
    "ClaudeUnavailable",
    "CuttingTokenizer",
    "TokenCount",
    "TokenCounter",
    "Tokenizer",
    "TokenizerLoader",
    "TokenizerSpec",
    "load_bundled_encoding",
    "load_tokenizer",
]

_logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).parent / "data"
DEFAULT_ENCODING = "o200k_base"

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# pat_str values copied verbatim from tiktoken_ext/openai_public.py (tiktoken 0.14).
O200K_PAT_STR = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
CL100K_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
# Meta's Llama 3 tokenizer (llama/tokenizer.py in meta-llama/llama3 and llama-models):
# cl100k's pattern without possessive quantifiers.
LLAMA3_PAT_STR = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Llama 3.1+ names its 256 special tokens this way; they follow the ranks (128000-128255).
_LLAMA3_NAMED = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|finetune_right_pad_id|>",
    "<|step_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|python_tag|>",
    "<|image|>",
)
LLAMA3_SPECIAL_TOKENS = _LLAMA3_NAMED + tuple(
    f"<|reserved_special_token_{2 + i}|>" for i in range(256 - len(_LLAMA3_NAMED))
)

O200K_SPECIALS = {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
CL100K_SPECIALS = {
    ENDOFTEXT: 100257,
    FIM_PREFIX: 100258,
    FIM_MIDDLE: 100259,
    FIM_SUFFIX: 100260,
    ENDOFPROMPT: 100276,
}


@dataclass(frozen=True)
class _Family:
    pat_str: str
    specials: dict[str, int] | None  # None: LLAMA3_SPECIAL_TOKENS, numbered after the ranks
    vocabulary: int  # number of ranks in the family's own file, to recognise it


FAMILIES = {
    "o200k": _Family(O200K_PAT_STR, O200K_SPECIALS, 199_998),
    "cl100k": _Family(CL100K_PAT_STR, CL100K_SPECIALS, 100_256),
    "llama3": _Family(LLAMA3_PAT_STR, None, 128_000),
}
_FAMILY_ALIASES = {"o200k_base": "o200k", "cl100k_base": "cl100k", "llama-3": "llama3"}


@dataclass(frozen=True)
class _Bundled:
    file: str
    sha256: str  # tiktoken's `expected_hash` for the uncompressed file
    family: str


BUNDLED = {
    "o200k_base": _Bundled(
        "o200k_base.tiktoken.gz", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d", "o200k"
    ),
    "cl100k_base": _Bundled(
        "cl100k_base.tiktoken.gz",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "cl100k",
    ),
}


class TokenizerLoadError(Exception):
    """A tokenizer file is missing, tampered with or malformed."""


@runtime_checkable
class Tokenizer(Protocol):
    """Counts the tokens of one string; `count` never raises for any str (an exact
    tokenizer may raise `estimate.EstimateInstead` to hand a text to the estimate)."""

    name: str
    exact: bool

    def count(self, text: str) -> int: ...


@runtime_checkable
class CuttingTokenizer(Tokenizer, Protocol):
    """A tokenizer the guard can cut with (tiktoken encodings, Claude's).

    `max_token_bytes`: every token spans between one and this many UTF-8 bytes of the
    text, or None when no such bound holds (Claude's markers cost tokens without bytes).
    `prefix(text, budget, count)`: (characters, tokens) of a prefix of `text` that counts
    at most `budget` tokens on its own by `count` (the caller's exact count), as long as
    the tokenizer can find.
    """

    @property
    def max_token_bytes(self) -> int | None: ...

    def prefix(self, text: str, budget: int, count: Callable[[str], int]) -> tuple[int, int]: ...


@dataclass(frozen=True, slots=True)
class TokenCount:
    tokens: int
    exact: bool


@dataclass(frozen=True)
class TokenizerSpec:
    """Which tokenizer to load.

    `encoding`: "o200k_base" or "cl100k_base" (bundled), `claude` / `claude-<version>`
    (claude.py), or the name to report for `path`.
    `path`: a tiktoken BPE file ("<base64> <rank>" lines) or a HuggingFace tokenizer.json,
    optionally gzip-compressed. `pattern`: the family whose pre-tokenizer pattern a BPE
    file uses: "o200k", "cl100k" or "llama3" (recognised from the vocabulary size if unset).
    """

    encoding: str = DEFAULT_ENCODING
    path: str | None = None
    pattern: str | None = None


def load_bundled_encoding(name: str) -> tiktoken.Encoding:
    """tiktoken's Encoding for a bundled encoding, from verified local data only."""
    bundled = BUNDLED.get(name)
    if bundled is None:
        raise ValueError(f"unknown bundled encoding {name!r}; expected one of {sorted(BUNDLED)}")
    path = DATA_DIR / bundled.file
    try:
        raw = gzip.decompress(path.read_bytes())
    except (OSError, EOFError) as exc:
        raise TokenizerLoadError(f"cannot read {path}: {exc}") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != bundled.sha256:
        raise TokenizerLoadError(
            f"{path}: sha256 {digest} differs from tiktoken's published {bundled.sha256}"
        )
    ranks = parse_tiktoken_bpe(raw, str(path))
    return _build_encoding(name, bundled.family, ranks)


def parse_tiktoken_bpe(data: bytes, source: str) -> dict[bytes, int]:
    """Ranks from a tiktoken BPE file; errors name the file and the first bad line."""
    try:
        ranks = {
            base64.b64decode(token): int(rank)
            for token, rank in (line.split() for line in data.splitlines() if line)
        }
    except (ValueError, binascii.Error):
        _raise_first_bad_line(data, source)
    if len(set(ranks.values())) != len(ranks):
        raise TokenizerLoadError(f"{source}: two tokens share a rank")
    # BPE maps whatever it cannot merge to single bytes; a missing one would crash tiktoken.
    missing = [byte for byte in range(256) if bytes([byte]) not in ranks]
    if missing:
        raise TokenizerLoadError(
            f"{source}: {len(missing)} single-byte tokens missing, e.g. {bytes([missing[0]])!r}"
        )
    return ranks


def _raise_first_bad_line(data: bytes, source: str) -> NoReturn:
    for number, line in enumerate(data.splitlines(), 1):
        if not line:
            continue
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError("expected two fields")
            base64.b64decode(parts[0], validate=True)
            int(parts[1])
        except (ValueError, binascii.Error) as exc:
            raise TokenizerLoadError(
                f"{source}: line {number} is not '<base64 token> <rank>': {line[:80]!r}"
            ) from exc
    raise TokenizerLoadError(f"{source}: not a tiktoken BPE file")


def _build_encoding(name: str, family_name: str, ranks: dict[bytes, int]) -> tiktoken.Encoding:
    import tiktoken  # noqa: PLC0415 -- loaded with the tokenizer, off the import path

    family = FAMILIES[family_name]
    specials = family.specials
    if specials is None or min(specials.values()) <= max(ranks.values()):
        # Llama 3 numbers its specials after the ranks; so does any file that is larger
        # than its family's. Counting ignores specials, only the IDs must not collide.
        names = LLAMA3_SPECIAL_TOKENS if specials is None else tuple(specials)
        first = max(ranks.values()) + 1
        specials = {token: first + index for index, token in enumerate(names)}
    encoding = tiktoken.Encoding(
        name, pat_str=family.pat_str, mergeable_ranks=ranks, special_tokens=dict(specials)
    )
    # The Rust core holds its own copy of the ranks; tiktoken keeps the Python dict only to
    # pickle the Encoding, which we never do. Dropped, its 200k entries stop costing the
    # host's memory and every full garbage collection of the host's heap.
    encoding._mergeable_ranks = {}
    return encoding


class TiktokenTokenizer:
    """A tiktoken Encoding as a `Tokenizer`: `count` equals `len(encode_ordinary(text))`."""

    exact = True

    def __init__(self, encoding: tiktoken.Encoding, name: str | None = None, chunkable: bool = True) -> None:
        self.encoding = encoding
        self.name: str = name or encoding.name
        # Whether the patterns' cut points (see chunking.py) hold for this encoding.
        self.chunkable = chunkable
        self._count_native = _buffer_counter(encoding)

    @functools.cached_property
    def max_token_bytes(self) -> int:
        """The longest token in bytes (128 for o200k_base and cl100k_base): every count is at
        least a text's UTF-8 size over it (and at most that size: every token is a byte or more)."""
        return max(map(len, self.encoding.token_byte_values()), default=1)

    def count(self, text: str) -> int:
        if self._count_native is None:
            return len(self.encoding.encode_ordinary(text))
        try:
            return self._count_native(text)
        except UnicodeEncodeError:
            return self._count_native(replace_surrogates(text))

    def prefix(self, text: str, budget: int, count: Callable[[str], int]) -> tuple[int, int]:
        """(characters, tokens) of a prefix of `text` that ends at a token boundary of the
        text's own tokenization and counts at most `budget` tokens on its own (by `count`).

        Raises UnicodeEncodeError for text with lone surrogates (no boundary to trust)."""
        if budget <= 0 or not text:
            return 0, 0
        # No prefix past this many characters can fit: each token is at most that many bytes.
        bound = min(len(text), budget * self.max_token_bytes)
        size = min(bound, first_prefix_chars(budget))
        while True:
            tokens: list[int] = self.encoding.encode_ordinary(text[:size])
            if len(tokens) > budget or size >= bound:
                break
            size = min(bound, 2 * size)
        keep = min(budget, len(tokens))
        for _ in range(_SHORTEN_ATTEMPTS):
            chars = _whole_characters(self.encoding.decode_bytes(tokens[:keep]))
            counted = count(text[:chars])
            if counted <= budget:
                return chars, counted
            keep = max(0, keep - (counted - budget))
        return _halving_prefix(text[:size], budget, count)


def _buffer_counter(encoding: tiktoken.Encoding) -> Callable[[str], int] | None:
    """Count via tiktoken's token buffer (4 bytes a token, no list of ints), if it agrees.

    `encode_to_tiktoken_buffer` is tiktoken's private fast path; with no allowed special
    token it tokenises exactly like `encode_ordinary`. It is used only after it gave the
    same counts on probe strings, so a future tiktoken that changes it costs speed, not
    correctness.
    """
    to_buffer = getattr(getattr(encoding, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    if to_buffer is None:
        return None
    no_specials: frozenset[str] = frozenset()

    def count(text: str) -> int:
        view = memoryview(to_buffer(text, no_specials))
        return view.nbytes // view.itemsize if view.itemsize else 0

    probes = [
        "",
        "hello world",
        f"a{ENDOFTEXT}b {ENDOFPROMPT}",
        " \r\n\t x\u00a0y",
        "日本語のテキスト",
        '{"k": [1, 2.5]}',
    ]
    try:
        if all(count(probe) == len(encoding.encode_ordinary(probe)) for probe in probes):
            return count
    except Exception:  # an incompatible private API: use the public one
        _logger.debug("tiktoken's token buffer is unusable here", exc_info=True)
    return None


def replace_surrogates(text: str) -> str:
    """What tiktoken does to a str that is not valid UTF-8: pair surrogates, replace the rest."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# The first prefix a cut tries is this many characters per token of budget (typical text
# runs 3-5); each next one is twice as long.
_FIRST_CHARS_PER_TOKEN = 4
_MIN_PREFIX_CHARS = 4096
# Attempts at shortening a cut whose own count came out over budget (re-tokenising a
# prefix can merge differently at its end), before halving the prefix instead.
_SHORTEN_ATTEMPTS = 8


def first_prefix_chars(budget: int) -> int:
    """How long the first prefix of a text is that a cut or a bounded count looks at."""
    return max(_MIN_PREFIX_CHARS, budget * _FIRST_CHARS_PER_TOKEN)


def _halving_prefix(text: str, budget: int, count: Callable[[str], int]) -> tuple[int, int]:
    chars = len(text) // 2
    while chars > 0:
        counted = count(text[:chars])
        if counted <= budget:
            return chars, counted
        chars //= 2
    return 0, 0


def _whole_characters(data: bytes) -> int:
    """How many characters the longest whole-UTF-8 prefix of `data` holds."""
    try:
        return len(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return len(data[: exc.start].decode("utf-8", "replace"))


class HuggingFaceTokenizer:
    """A `tokenizers.Tokenizer` (tokenizer.json) as a `Tokenizer`."""

    exact = True
    chunkable = False  # its pre-tokenizer is arbitrary, so no cut is known to be exact

    def __init__(self, tokenizer: Any, name: str) -> None:
        self.name = name
        self._tokenizer = tokenizer

    def count(self, text: str) -> int:
        try:
            return len(self._tokenizer.encode(text, add_special_tokens=False).ids)
        except (TypeError, UnicodeEncodeError):  # lone surrogates are rejected as "not str"
            return len(self._tokenizer.encode(replace_surrogates(text), add_special_tokens=False).ids)


def load_tokenizer(spec: TokenizerSpec) -> Tokenizer:
    """The exact tokenizer `spec` names, or the estimate (one warning) if it cannot load."""
    return _load(spec)[0]


def _load(spec: TokenizerSpec) -> tuple[Tokenizer, str | None]:
    try:
        return _load_exact(spec), None
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pyo3 panics derive from BaseException
        error = f"{type(exc).__name__}: {exc}"
        claude = spec.path is None and is_claude(spec.encoding)
        _logger.warning(
            "mcp-tokens cannot load tokenizer %s (%s); token counts are %s (exact=false)",
            spec.path or spec.encoding,
            error,
            "the estimate calibrated on Claude's counts" if claude else "estimates",
        )
        return _estimate_tokenizer(spec if claude else None), error


def _estimate_tokenizer(spec: TokenizerSpec | None = None) -> Tokenizer:
    if spec is not None and spec.path is None and is_claude(spec.encoding):
        return claude_estimate(spec.encoding)
    return EstimateTokenizer()


def _load_exact(spec: TokenizerSpec) -> Tokenizer:
    if spec.path is None and is_claude(spec.encoding):
        tokenizer: Tokenizer = load_claude(spec.encoding)
        return tokenizer
    if spec.path is None:
        return TiktokenTokenizer(load_bundled_encoding(spec.encoding))
    path = Path(spec.path).expanduser()
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    name = _custom_name(spec, path)
    if data.lstrip()[:1] == b"{":
        return _load_huggingface(data, name, str(path))
    ranks = parse_tiktoken_bpe(data, str(path))
    family = _family_of(spec.pattern, len(ranks), str(path))
    return TiktokenTokenizer(_build_encoding(name, family, ranks), name)


def _family_of(pattern: str | None, vocabulary: int, source: str) -> str:
    if pattern is not None:
        family = _FAMILY_ALIASES.get(pattern.lower(), pattern.lower())
        if family not in FAMILIES:
            raise ValueError(f"unknown tokenizer pattern {pattern!r}; expected one of {sorted(FAMILIES)}")
        return family
    for family, known in FAMILIES.items():
        if known.vocabulary == vocabulary:
            return family
    raise TokenizerLoadError(
        f"{source}: {vocabulary} ranks match no known family; set the pattern to one of {sorted(FAMILIES)}"
    )


def _load_huggingface(data: bytes, name: str, source: str) -> Tokenizer:
    try:
        from tokenizers import Tokenizer as HfTokenizer  # noqa: PLC0415 -- an optional extra
    except ImportError as exc:
        raise TokenizerLoadError(
            f"{source} is a HuggingFace tokenizer.json, but the `tokenizers` package is not installed "
            "(install the `huggingface` extra)"
        ) from exc
    tokenizer = HfTokenizer.from_str(data.decode("utf-8"))
    # A file made for training may truncate or pad; a count must see the whole text.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return HuggingFaceTokenizer(tokenizer, name)


def _custom_name(spec: TokenizerSpec, path: Path) -> str:
    """`spec.encoding` unless it is a bundled name; else the file name without suffixes."""
    if spec.encoding not in BUNDLED and spec.encoding:
        return spec.encoding
    stem = path.name
    for suffix in (".gz", ".json", ".tiktoken", ".model", ".bpe"):
        stem = stem.removesuffix(suffix)
    if stem == "tokenizer" and path.parent.name:  # models/Llama-3.2-1B/tokenizer.json
        stem = path.parent.name
    return stem or "custom"


class TokenizerLoader:
    """Loads a tokenizer on a daemon thread; callers ask `ready()` without blocking.

    Loading o200k takes about 0.3 s of CPU; the instrumentation starts it at
    `instrument()` and defers counts until it is ready, so no user call ever waits.
    """

    def __init__(self, spec: TokenizerSpec) -> None:
        self._spec = spec
        self._lock = threading.Lock()
        self._loaded = threading.Event()
        self._thread: threading.Thread | None = None
        self._tokenizer: Tokenizer | None = None
        self._error: str | None = None
        self._loaded_ns = 0

    @property
    def spec(self) -> TokenizerSpec:
        return self._spec

    def start(self) -> None:
        """Start loading (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None or self._loaded.is_set():  # started, or `run` loaded it
                return
            self._thread = threading.Thread(target=self.run, name="mcp-tokens-tokenizer", daemon=True)
            self._thread.start()

    def ready(self) -> bool:
        """Whether loading finished: exact, or fallen back to the estimate."""
        return self._loaded.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Start loading if needed and wait up to `timeout` seconds; returns `ready()`."""
        self.start()
        return self._loaded.wait(timeout)

    def tokenizer(self) -> Tokenizer:
        """The loaded tokenizer, waiting for it (and starting the load) if needed."""
        self.wait()
        assert self._tokenizer is not None  # set before the event
        return self._tokenizer

    @property
    def error(self) -> str | None:
        """Why the exact tokenizer could not load, once loading finished with the estimate."""
        return self._error

    @property
    def loaded_ns(self) -> int:
        """When loading finished (`time.time_ns()`), 0 until then."""
        return self._loaded_ns

    def run(self) -> None:
        """Load on this thread (`start` runs this on a daemon thread)."""
        try:
            self._tokenizer, self._error = _load(self._spec)
            # Off everyone's path now, rather than inside the first long text's analysis.
            compile_cut_patterns()
        finally:
            if self._tokenizer is None:  # only if _load itself was interrupted
                self._tokenizer = _estimate_tokenizer(self._spec)
                self._error = "tokenizer loading was interrupted"
            self._loaded_ns = time.time_ns()
            self._loaded.set()


class TokenCounter:
    """Counts text with one tokenizer: cached, capped, chunked, never raising.

    - Strings go through an LRU of `cache_entries` (cache.py; it keeps no text alive);
      `cache_entries=0` disables it. Long ones too: a lookup costs a hash of the text
      (about 0.3 ms per MB) against about 70 ms per MB to count it, and a process that is
      both the client and the server of a call (an in-process server, a proxy, a gateway)
      hands the same result to the counter twice. `cacheable_chars` caps the length.
    - Texts over `max_bytes` of UTF-8 get the content-aware estimate, `exact=False`.
    - Longer texts than `chunk_chars` are counted in exact chunks (see chunking.py) on up
      to `threads` threads (default min(2, CPUs)), so memory stays bounded. Texts with
      non-ASCII characters use chunks of at most `non_ascii_chunk_chars`: tiktoken copies
      such a chunk to UTF-8 before it releases the GIL (5 ms for 1M CJK characters, 0.2 ms
      for 64K), and every other thread of the process waits meanwhile. ASCII text is its
      own UTF-8, so its chunks cost no such wait.
    - An internal error makes that one count an estimate with `exact=False` (logged once).
    - `pause`, if given, is called before each chunk: where the caller hands the GIL over
      (the analysis on a thread of the application).
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        max_bytes: int = 32 * 1024 * 1024,
        chunk_chars: int = 1 << 20,
        non_ascii_chunk_chars: int = 1 << 16,
        threads: int | None = None,
        cache_entries: int = 4096,
        cacheable_chars: int | None = None,
        pause: Callable[[], None] | None = None,
    ) -> None:
        for argument, value, least in (
            ("max_bytes", max_bytes, 1),
            ("chunk_chars", chunk_chars, 1),
            ("non_ascii_chunk_chars", non_ascii_chunk_chars, 1),
            ("threads", 1 if threads is None else threads, 1),
            ("cache_entries", cache_entries, 0),
            ("cacheable_chars", 0 if cacheable_chars is None else cacheable_chars, 0),
        ):
            if value < least:
                raise ValueError(f"TokenCounter: {argument} must be >= {least}, got {value}")
        self._tokenizer = tokenizer
        self._exact = bool(tokenizer.exact)
        self._chunkable = bool(getattr(tokenizer, "chunkable", False))
        self._max_bytes = max_bytes
        self._chunk_chars = chunk_chars
        self._non_ascii_chunk_chars = min(chunk_chars, non_ascii_chunk_chars)
        self._threads = default_threads() if threads is None else threads
        self._cache: CountCache[TokenCount] = CountCache(cache_entries)
        self._cache_get = self._cache.get
        longest = sys.maxsize if cacheable_chars is None else cacheable_chars
        self._cacheable_chars = longest if self._cache.enabled else -1
        self._failed_once = False
        self._pause = pause
        # The tokenizer's own estimate when it has one (Claude's is calibrated on Claude's
        # counts), else the o200k-calibrated one.
        self._estimate: Callable[[str], int] = getattr(tokenizer, "estimate", estimate_tokens)

    @property
    def name(self) -> str:
        return self._tokenizer.name

    @property
    def exact(self) -> bool:
        return self._exact

    @property
    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def max_bytes(self) -> int:
        return self._max_bytes

    def count(self, text: str) -> TokenCount:
        """Tokens of `text`; `exact` is False when they were estimated."""
        try:
            if len(text) <= self._cacheable_chars:
                cached = self._cache_get(text)
                if cached is not None:
                    return cached
                counted = self._count(text)
                self._cache.put(text, counted)
                return counted
            return self._count(text)
        except EstimateInstead:  # the tokenizer's work budget ran out on this text
            return TokenCount(self._estimated(text), False)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:  # includes pyo3 panics; hostile input must never escape
            if not self._failed_once:
                self._failed_once = True
                _logger.warning("mcp-tokens could not count a text exactly; estimating", exc_info=True)
            return TokenCount(self._estimated(text), False)

    def cache_info(self) -> CacheInfo:
        return self._cache.info()

    def _estimated(self, text: str) -> int:
        try:
            return self._estimate(text)
        except Exception:  # the estimate is the last resort; fall back to the plain one
            return _estimate_safely(text)

    def _count(self, text: str) -> TokenCount:
        if utf8_size_exceeds(text, self._max_bytes):
            return TokenCount(self._estimated(text), False)
        chunk_chars = self._chunk_chars if text.isascii() else self._non_ascii_chunk_chars
        if self._chunkable and len(text) > chunk_chars:
            tokens = count_in_chunks(self._tokenizer.count, text, chunk_chars, self._threads, self._pause)
        else:
            tokens = self._tokenizer.count(text)
        return TokenCount(tokens, self._exact)


def _estimate_safely(text: object) -> int:
    try:
        return estimate_tokens(text if isinstance(text, str) else str(text))
    except Exception:  # the estimate is the last resort; a rough figure beats none
        return len(text) // 4 if isinstance(text, str) else 0
