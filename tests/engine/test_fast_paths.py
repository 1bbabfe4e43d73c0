"""Fast paths give what the plain versions give.

``_truncate.without_fences`` (the fence pattern's substitution, found by
``find``) and ``compress_lines`` (only the kept lines split off).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_context_guard import compress_lines
from langchain_context_guard.engine.passes._text import where
from langchain_context_guard.engine.passes._truncate import _FENCE, without_fences

PARTS = ["```", "`", "\n", " ", "\t", "bash", "ls", "x", "é", "_-+", "٣", "\r", "ls\n"]


def substituted(content: str, args: set[str]) -> str:
    return _FENCE.sub(
        lambda m: "" if m.group(1).strip() in args else m.group(0), content
    )


@settings(max_examples=1_000, deadline=None)
@given(
    st.lists(st.sampled_from(PARTS) | st.text(max_size=2), max_size=40).map("".join),
    st.sets(st.sampled_from(["ls", "x", "bash", "ls x", "", "`", "ls\nx"])),
)
def test_without_fences_drops_what_the_fence_pattern_drops(
    content: str, args: set[str]
) -> None:
    assert without_fences(content, args) == substituted(content, args)


def test_a_written_out_command_is_dropped_and_others_stay() -> None:
    text = "I look.\n\n```bash\nls -la\n```\nThen:\n```python\nprint(1)\n```  \nend"
    assert (
        without_fences(text, {"ls -la"})
        == "I look.\nThen:\n```python\nprint(1)\n```  \nend"
    )
    assert (
        without_fences(text, {"print(1)"})
        == "I look.\n\n```bash\nls -la\n```\nThen:\nend"
    )
    assert without_fences(text, set()) is text


def split_all(text: str, head_lines: int, tail_lines: int) -> str:
    """``compress_lines`` as it was: every line split off."""
    lines = text.split("\n")
    keep_all = len(lines) <= head_lines + tail_lines
    head = lines if keep_all else lines[:head_lines]
    tail = [] if keep_all or not tail_lines else lines[-tail_lines:]
    omitted = 0 if keep_all else len(lines) - head_lines - tail_lines

    def cut(line: str) -> str:
        return (
            line
            if len(line) <= 240
            else line[:240] + f" ...[{len(line) - 240:,} chars]"
        )

    note = (
        f"[... {omitted:,} lines omitted, original {len(text):,} characters; "
        f"older tool output compressed by context guard{where(None)} ...]"
    )
    return "\n".join([*map(cut, head), note, *map(cut, tail)])


@settings(max_examples=1_000, deadline=None)
@given(
    st.lists(st.sampled_from(["\n", "a", "bb ", "\n\n", "x" * 300]), max_size=30).map(
        "".join
    ),
    st.integers(-2, 5),
    st.integers(-2, 4),
)
def test_compress_lines_splits_off_only_what_it_keeps(
    text: str, head: int, tail: int
) -> None:
    assert compress_lines(text, head, tail) == split_all(text, head, tail)


def test_without_fences_on_the_shared_transcripts() -> None:
    # Every fenced assistant text of the 42 runs, with each of its own blocks'
    # bodies as the arguments (and none), as the pattern's substitution gives.
    import pytest

    from langchain_context_guard.replay import load_trajectories, shared_trajectory_dir

    directory = shared_trajectory_dir()
    if directory is None:
        pytest.skip("no shared data")
    texts = [
        m.text
        for messages in load_trajectories(directory).values()
        for m in messages
        if "```" in m.text
    ]
    assert len(texts) > 100
    for text in texts:
        bodies = {m.group(1).strip() for m in _FENCE.finditer(text)}
        for args in (set(), bodies, set(list(bodies)[:1])):
            assert without_fences(text, args) == substituted(text, args)
