"""``_truncate.without_fences``: the fence pattern's substitution, found by ``find``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_context_guard.engine._truncate import _FENCE, without_fences

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
