"""Two texts that share a head and a tail, counted from shared pieces.

A rewrite keeps most of its original's text: deduplication drops a fenced
command from an assistant message's end, compression and truncation keep a head
and a tail. Counting both whole encodes the shared text twice (a cold history's
batch grew by about a fifth). tiktoken cuts a text into pieces with its pattern
and encodes each piece alone, so a text split where the pattern ends a piece
anyway counts as the sum of its parts, exactly. ``shared`` finds such cuts.

Where the known patterns (r50k, p50k, cl100k, o200k: ``KNOWN_PATTERNS``) surely
end a piece: after an ASCII letter, before an ASCII character that is neither
a letter nor an apostrophe. No alternative of theirs matches a letter followed
by such a character (letters, with an optional lead and contraction, digits,
punctuation, whitespace), none looks behind, and the only anchor, ``$`` after
whitespace, cannot fall on a letter; so the pieces before the cut are the
text's before it, and the pieces after it are the rest's.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

_LETTERS = frozenset(string.ascii_letters)
_NOT_LETTER = r"[\x00-\x26\x28-\x40\x5b-\x60\x7b-\x7f]"  # ASCII, nor ' nor a letter
_LETTER_BEFORE = re.compile(rf"[A-Za-z](?={_NOT_LETTER})")
"""A cut just after the match (``cut``)."""
_BEFORE_LETTER = re.compile(rf"{_NOT_LETTER}(?=[A-Za-z])")
"""A cut just before the match, in a reversed text."""
_REACH = 256
"""How far from the end of a shared head (start of a tail) a cut is looked for."""
MIN_SHARED = 128
"""Fewer shared characters than this are not worth more pieces."""

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
"""cl100k_base's pre-tokenizer, as ``tiktoken_ext.openai_public`` writes it."""
O200K_PATTERN = (
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*"""
    r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"""
    r"""[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
"""o200k_base's pre-tokenizer, as ``tiktoken_ext.openai_public`` writes it."""

KNOWN_PATTERNS = frozenset(
    {
        # r50k_base, p50k_base, p50k_edit, gpt2
        r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|"""
        r"""\s+(?!\S)|\s""",
        CL100K_PATTERN,
        O200K_PATTERN,  # o200k_base, o200k_harmony
    }
)
"""tiktoken patterns ``cut`` holds for (an encoding with another counts whole)."""
NEWLINE_PATTERNS = frozenset(p for p in KNOWN_PATTERNS if r"\s*[\r\n]" in p)
"""The cl100k and o200k patterns, for which ``pieces`` cuts are exact too."""

PIECE_CHARS = 1_024
"""``pieces`` are at least this long, but the last."""
_NEWLINE_CUT = re.compile(r"\n(?=[^\s/])")


def pieces(text: str, size: int = PIECE_CHARS) -> list[str]:
    r"""``text`` cut where the cl100k_base and o200k_base pre-tokenizers cut anyway.

    tiktoken splits a text with a regex and encodes each match on its own, so
    a text cut between two matches counts the tokens of its pieces. The cuts
    fall after a newline followed by a character that is neither whitespace
    nor ``/``: the only matches that hold a newline are a run of whitespace
    (``\s*[\r\n]+``, ``\s+``...) and punctuation followed by newlines
    (o200k_base: newlines and slashes), and none goes on past such a
    character; the regexes look behind nothing, so the matches after the cut
    are those of the rest alone; and before it, those of the text up to it
    (the one lookahead, ``\s+(?!\S)``, is never reached on a run of
    whitespace that ends with a newline: ``\s*[\r\n]+`` takes it first).
    ``tests/engine/test_encoding.py`` checks the sums against whole encodes.
    Each cut is the first at least ``size`` characters after the last one, so
    texts that share a beginning share their pieces up to where they differ.
    """
    out: list[str] = []
    start, end = 0, len(text)
    while end - start > size:
        found = _NEWLINE_CUT.search(text, start + size)
        if found is None:
            break
        out.append(text[start : found.end()])
        start = found.end()
    out.append(text[start:])
    return out


def cut(text: str, k: int) -> bool:
    """Whether the known patterns end a piece of ``text`` at ``k`` (or it is an end)."""
    if k <= 0 or k >= len(text):
        return True
    after = text[k]
    return (
        text[k - 1] in _LETTERS
        and after < "\x80"
        and after not in _LETTERS
        and after != "'"
    )


def _head(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a.startswith(b[:n]):
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi + 1] != b[:hi + 1]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _tail(a: str, b: str, most: int) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``most``."""
    la, lb = len(a), len(b)
    if a.endswith(b[lb - most :]):
        return most
    lo, hi = 0, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.endswith(b[lb - mid : lb - lo], 0, la - lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared(a: str, b: str) -> tuple[str, str, str, str] | None:
    """``(head, a_middle, b_middle, tail)``: each text is head + its middle + tail.

    Cut where the known patterns end a piece in both texts, so each text's
    count is the sum of its pieces'. None when they share too little.
    """
    k = _head(a, b)
    s = _tail(a, b, min(len(a), len(b)) - k)
    if not (cut(a, k) and cut(b, k)):
        # Within the shared head both texts have the same characters around a cut.
        low = max(k - _REACH, 0)
        found = _BEFORE_LETTER.search(a[low:k][::-1])
        k = k - 1 - found.start() if found else 0
    ta, tb = len(a) - s, len(b) - s
    if not (cut(a, ta) and cut(b, tb)):
        found = _LETTER_BEFORE.search(a, ta, min(ta + _REACH, len(a)))
        shift = found.start() + 1 - ta if found else s
        ta, tb = ta + shift, tb + shift
    if k + len(a) - ta < MIN_SHARED:
        return None
    head = b if k == len(b) else a[:k]  # a rewrite that kept a head: no copy
    return head, a[k:ta], b[k:tb], a[ta:]


def split_pairs(
    pairs: Sequence[tuple[BaseMessage, BaseMessage]],
    queued: Sequence[BaseMessage],
    limit: int,
) -> dict[int, list[str]]:
    """Each paired message's content, then the pieces to count it from, by id.

    Only pairs both ``queued``, string contents of at most ``limit`` characters
    (longer ones are counted from samples), a message in one pair at most.
    """
    out: dict[int, list[str]] = {}
    ids = {id(m) for m in queued}
    for a, b in pairs:
        ia, ib = id(a), id(b)
        if ia not in ids or ib not in ids or ia in out or ib in out:
            continue
        ta, tb = a.content, b.content
        if (
            not (isinstance(ta, str) and isinstance(tb, str))
            or max(len(ta), len(tb)) > limit
        ):
            continue
        got = shared(ta, tb)
        if got is None:
            continue
        head, mid_a, mid_b, tail = got
        pa, pb = [ta], [tb]
        if head:
            pa.append(head)
            pb.append(head)
        if mid_a:
            pa.append(mid_a)
        if mid_b:
            pb.append(mid_b)
        if tail:
            pa.append(tail)
            pb.append(tail)
        out[ia], out[ib] = pa, pb
    return out
