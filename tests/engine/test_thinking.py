from langchain_core.messages import AIMessage, HumanMessage

from langchain_context_guard import strip_old_thinking
from tests.engine._support import ai, call, result, snapshot

SIGNED = {"type": "thinking", "thinking": "let me think", "signature": "c2lnbmF0dXJl"}
REDACTED = {"type": "redacted_thinking", "data": "ZW5jcnlwdGVk"}


def _answer(n, **kwargs):
    return AIMessage(
        [SIGNED, REDACTED, {"type": "text", "text": f"answer {n}"}],
        id=f"a{n}",
        **kwargs,
    )


def test_keeps_newest_and_strips_older_blocks_whole():
    history = [HumanMessage("q1"), _answer(1), HumanMessage("q2"), _answer(2)]
    before = snapshot(history)
    out = strip_old_thinking(history)
    assert snapshot(history) == before
    assert out[1].content == [{"type": "text", "text": "answer 1"}]
    assert out[3] is history[3]
    assert out[3].content[0] == SIGNED  # kept exactly, signature and all


def test_reasoning_in_additional_kwargs_is_removed():
    old = AIMessage(
        "a1", additional_kwargs={"reasoning_content": "hmm", "reasoning": {"id": "r"}}
    )
    new = AIMessage("a2", additional_kwargs={"reasoning_content": "later"})
    out = strip_old_thinking([HumanMessage("q"), old, HumanMessage("q2"), new])
    assert out[1].additional_kwargs == {}
    assert out[1].content == "a1"
    assert (
        out[3] is not None and out[3].additional_kwargs["reasoning_content"] == "later"
    )


def test_reasoning_block_only_message_becomes_empty_text():
    old = AIMessage([{"type": "reasoning", "summary": [{"text": "s"}]}])
    out = strip_old_thinking([HumanMessage("q"), old, HumanMessage("q2"), _answer(2)])
    assert out[1].content == ""


def test_current_unfinished_tool_use_turn_keeps_all_its_reasoning():
    history = [
        HumanMessage("q1"),
        _answer(1),
        HumanMessage("q2"),
        ai(call("c1"), content=[SIGNED], id="s1"),
        result("c1"),
        ai(call("c2"), content=[SIGNED], id="s2"),
        result("c2"),
    ]
    out = strip_old_thinking(history)
    assert out[3] is history[3]
    assert out[5] is history[5]
    assert out[1].content == [{"type": "text", "text": "answer 1"}]


def test_finished_turn_reasoning_goes():
    history = [
        HumanMessage("q1"),
        ai(call("c1"), content=[SIGNED], id="s1"),
        result("c1"),
        _answer(1),
    ]
    out = strip_old_thinking(history)
    assert out[1].content == ""
    assert out[1].tool_calls == history[1].tool_calls
    assert out[3] is history[3]


def test_keep_recent_zero_and_two():
    history = [
        HumanMessage("q"),
        _answer(1),
        HumanMessage("q"),
        _answer(2),
        HumanMessage("q"),
        _answer(3),
    ]
    assert all(
        len(m.content) == 1 for m in strip_old_thinking(history, keep_recent=0)[1::2]
    )
    kept = strip_old_thinking(history, keep_recent=2)
    assert kept[3] is history[3] and kept[5] is history[5]
    assert len(kept[1].content) == 1


def test_nothing_to_strip_returns_same_list_and_is_idempotent():
    history = [HumanMessage("q"), _answer(1)]
    assert strip_old_thinking(history) is history
    two = [HumanMessage("q"), _answer(1), HumanMessage("q2"), _answer(2)]
    once = strip_old_thinking(two)
    assert strip_old_thinking(once) is once
