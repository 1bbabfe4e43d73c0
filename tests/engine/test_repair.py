import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import (
    MARKER_KEY,
    ContextGuard,
    GuardPolicy,
    repair_tool_pairs,
)
from langchain_context_guard.engine.passes._repair import repair_part
from langchain_context_guard.engine.passes._sanitize import INVALID_CALL_NOTE
from tests.engine._support import (
    ai,
    assert_paired,
    call,
    pairing_errors,
    result,
    snapshot,
)


def test_valid_history_is_returned_as_is():
    history = [
        HumanMessage("q"),
        ai(call("a"), call("b")),
        result("a"),
        result("b"),
        AIMessage("done"),
    ]
    assert repair_tool_pairs(history) is history


def test_displaced_result_is_moved_right_after_its_call():
    history = [
        HumanMessage("q"),
        ai(call("a")),
        HumanMessage("interjection"),
        result("a", id="ra"),
    ]
    before = snapshot(history)
    out = repair_tool_pairs(history)
    assert snapshot(history) == before
    assert [m.id for m in out if isinstance(m, ToolMessage)] == ["ra"]
    assert isinstance(out[2], ToolMessage) and out[2] is history[3]
    assert_paired(out)


def test_result_before_its_call_is_moved_after_it():
    history = [HumanMessage("q"), result("a", id="ra"), ai(call("a"))]
    out = repair_tool_pairs(history)
    assert out[1] is history[2] and out[2] is history[1]


def test_duplicate_results_keep_the_first():
    history = [
        ai(call("a")),
        result("a", "first", id="r1"),
        result("a", "second", id="r2"),
    ]
    out = repair_tool_pairs(history)
    assert [m.id for m in out[1:]] == ["r1"]


def test_orphan_result_is_dropped():
    history = [HumanMessage("q"), result("gone", id="orphan"), AIMessage("hi")]
    out = repair_tool_pairs(history)
    assert "orphan" not in [m.id for m in out]
    assert_paired(out)


def test_missing_result_gets_a_synthetic_error_result():
    history = [
        HumanMessage("q"),
        ai(call("a", name="search"), call("b")),
        result("b", id="rb"),
    ]
    out = repair_tool_pairs(history)
    assert_paired(out)
    synthetic = next(
        m for m in out if isinstance(m, ToolMessage) and m.tool_call_id == "a"
    )
    assert synthetic.status == "error"
    assert synthetic.name == "search"
    assert synthetic.additional_kwargs[MARKER_KEY] == {"kind": "synthetic_result"}
    assert synthetic.id == "context-guard-missing-a"
    assert "Error" in synthetic.content


def test_parallel_results_keep_their_order_and_synthetic_ones_follow():
    history = [
        ai(call("a"), call("b"), call("c")),
        result("c", id="rc"),
        result("a", id="ra"),
    ]
    out = repair_tool_pairs(history)
    assert [m.tool_call_id for m in out[1:]] == ["c", "a", "b"]
    assert out[1] is history[1]


def test_a_reused_call_id_is_renamed_from_its_second_use():
    """Ids must be unique in a request: the later call is sent as ``a-2``.

    The result before it answers the earlier call; with none after it, the
    renamed call gets the synthetic one. The earlier messages stay as they were.
    """
    history = [
        ai(call("a"), content="first", id="first"),
        result("a", "old output", id="old"),
        ai(call("a"), call("b"), id="again"),
        result("b", id="rb"),
    ]
    out = repair_tool_pairs(history)
    assert out[:2] == history[:2]
    again = next(m for m in out if m.id == "again")
    assert [c["id"] for c in again.tool_calls] == ["a-2", "b"]
    answers = [(m.tool_call_id, m.status) for m in out if isinstance(m, ToolMessage)]
    assert answers == [("a", "success"), ("b", "success"), ("a-2", "error")]
    assert_paired(out)


def test_every_use_of_a_reused_id_is_sent_with_its_own_result():
    """A history that repeats a step, ids and all (exports; servers that number
    their calls per turn): each use is answered by the results after it."""
    history = [HumanMessage("task", id="task")]
    for n in range(3):
        history += [
            ai(call("call_0", name="Edit"), content=f"edit {n}", id=f"a{n}"),
            result("call_0", f"edited ({n})", id=f"r{n}"),
        ]
    out = repair_tool_pairs(history)
    assert [m.id for m in out] == [m.id for m in history]
    ids = [
        (m.tool_calls[0]["id"], out[k + 1].tool_call_id)
        for k, m in enumerate(out)
        if m.type == "ai"
    ]
    assert ids == [
        ("call_0", "call_0"),
        ("call_0-2", "call_0-2"),
        ("call_0-3", "call_0-3"),
    ]
    assert repair_tool_pairs(out) is out  # idempotent
    assert_paired(out)


def test_repeated_call_id_within_one_message_is_answered_once():
    history = [ai(call("a"), call("a")), result("a")]
    out = repair_tool_pairs(history)
    assert len(out[0].tool_calls) == 1
    assert_paired(out)


def test_deterministic_and_idempotent():
    history = [
        result("x"),
        ai(call("a"), call("b")),
        HumanMessage("q"),
        result("b"),
        result("b"),
    ]
    once = repair_tool_pairs(history)
    assert snapshot(repair_tool_pairs(history)) == snapshot(once)
    assert repair_tool_pairs(once) is once


@pytest.mark.parametrize(
    "history",
    [
        [ToolMessage("x", tool_call_id="a")],
        [ai(call("a")), ai(call("b"))],
        [ai(call("a")), result("b"), result("a"), result("a")],
    ],
    ids=["only-orphan", "two-unanswered", "mixed"],
)
def test_invariant_every_call_answered_once_directly_after_it(history):
    assert pairing_errors(repair_tool_pairs(history)) == []


def _invalid(call_id: str = "bad", content: str = "") -> AIMessage:
    return AIMessage(
        content,
        invalid_tool_calls=[
            {
                "type": "invalid_tool_call",
                "id": call_id,
                "name": "bash",
                "args": "{not json",
                "error": "bad JSON",
            }
        ],
    )


NOTE = INVALID_CALL_NOTE.format(name="bash", why="bad JSON")


def test_invalid_tool_calls_become_a_note_and_lose_their_results():
    history = [
        HumanMessage("q"),
        _invalid(content="trying"),
        result("bad", "an answer to a call that was never valid"),
        ai(call("a")),
        result("a"),
    ]
    out = repair_tool_pairs(history)
    assert all(not getattr(m, "invalid_tool_calls", None) for m in out)
    assert [m.content for m in out] == ["q", f"trying\n\n{NOTE}", "", "ok"]
    assert_paired(out)
    assert repair_tool_pairs(out) is out


def test_an_assistant_message_with_only_invalid_calls_becomes_its_note():
    history = [HumanMessage("q"), _invalid(), AIMessage("answer")]
    out = repair_tool_pairs(history)
    assert [m.content for m in out] == ["q", NOTE, "answer"]
    assert history[1].invalid_tool_calls  # the input is untouched


def test_the_token_change_of_a_repair_counts_the_renamed_ids() -> None:
    """A counter that counts call ids (as a user's may) sees the renamed ones."""
    history = [HumanMessage("task", id="task")]
    for n in range(40):  # the same step repeated, ids and all
        history += [
            ai(call("call_0", name="Edit"), content=f"edit {n}", id=f"a{n}"),
            result("call_0", f"edited ({n})", id=f"r{n}"),
        ]

    def count(message: BaseMessage) -> int:
        return len(repr(message))  # ids included

    out, _, delta, _ = repair_part(history, count=count)
    assert sum(map(count, out)) == sum(map(count, history)) + delta
    for stable in (False, True):  # pruned afresh, or appended to the last prompt
        policy = GuardPolicy(context_window=128_000, stable_prefix=stable)
        guard = ContextGuard(policy, token_counter=lambda ms: sum(map(count, ms)))
        for n in range(3, len(history) + 1, 2):
            prepared = guard.prepare(history[:n])
            assert prepared.report.tokens_after == guard.count_tokens(prepared.messages)
