"""bpe-openai's Rust encoder: tiktoken's counts at about half its CPU time.

The ``offline`` extra installs ``bpe-openai``, whose extension module counts a
text's tokens without building the token list. Its counts are tiktoken's
``encode_ordinary`` lengths (special-token text such as ``<|endoftext|>``
counted as ordinary text) for the encodings in ``PROVEN``, and only those are
counted here: ``tests/engine/test_bpe.py`` holds the two equal on generated
text and on every shared transcript. A text with lone surrogates (invalid
UTF-8) is mended as tiktoken mends it, then counted. Any other encoding, or an
extension without the calls used here (``tokenizer_for_encoding``,
``supported_encodings``, ``count``), is left to tiktoken.

The extension is loaded on its own: importing the ``bpe_openai`` package first
builds every encoding's ranks table in Python (about 1.6 s), which counting
does not need (loading the extension and a table takes 0.05-0.15 s). It is
registered under its own name, so a later ``import bpe_openai`` finds it.
The extension holds the GIL while it counts: a batch is counted on the
calling thread (``_encodings``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from ._pieces import CL100K_PATTERN, O200K_PATTERN

NAME = "bpe-openai"
"""The backend's name, as a counter's name starts (``bpe-openai:cl100k_base``)."""
PROVEN = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}
"""Encodings whose counts are held equal to tiktoken's, and their split patterns."""
_MODULE = "bpe_openai._bindings"


def _extension() -> ModuleType | None:
    """``bpe_openai._bindings``, loaded without its package (None: absent)."""
    loaded = sys.modules.get(_MODULE)
    if loaded is not None:
        return loaded
    try:
        package = importlib.util.find_spec("bpe_openai")  # finds it; does not import
    except (ImportError, ValueError):
        return None
    if package is None or not package.submodule_search_locations:
        return None
    for folder in package.submodule_search_locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            if not path.is_file():
                continue
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, str(path))
            spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
            if spec is None:
                return None
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
            sys.modules[_MODULE] = module
            return module
    return None


def _tokenizer(name: str) -> Any | None:
    """The extension's tokenizer for ``name``, if it has the calls used here."""
    try:
        module = _extension()
        if module is None or name not in PROVEN:
            return None
        if name not in module.supported_encodings():
            return None
        tokenizer = module.tokenizer_for_encoding(name)
    except Exception:  # a broken or changed install: tiktoken counts instead
        return None
    return tokenizer if callable(getattr(tokenizer, "count", None)) else None


def bpe_count(name: str) -> Callable[[str], int] | None:
    """Tokens of a text in encoding ``name``, as tiktoken counts (None: not served)."""
    tokenizer = _tokenizer(name)
    if tokenizer is None:
        return None
    count = tokenizer.count

    def length(text: str) -> int:
        try:
            return int(count(text))
        except UnicodeEncodeError:
            # As tiktoken's encode_ordinary: surrogates paired through UTF-16,
            # lone ones replaced by U+FFFD.
            mended = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            return int(count(mended))

    return length
