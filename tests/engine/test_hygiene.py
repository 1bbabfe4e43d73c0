from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from langchain_context_guard import MARKER_KEY, enforce_provider_hygiene
from tests.engine._support import ai, call, result


def test_user_first_history_is_returned_as_is():
    history = [SystemMessage("s"), HumanMessage("q"), AIMessage("a")]
    assert enforce_provider_hygiene(history) is history


def test_assistant_first_gets_a_marked_user_placeholder_after_system():
    history = [SystemMessage("s"), ai(call("a")), result("a"), AIMessage("done")]
    out = enforce_provider_hygiene(history)
    assert isinstance(out[1], HumanMessage)
    assert out[1].additional_kwargs[MARKER_KEY] == {"kind": "placeholder"}
    assert out[0] is history[0] and out[2:] == history[1:]
    assert enforce_provider_hygiene(out) is out


def test_empty_tool_result_gets_placeholder_text_and_empty_messages_go():
    history = [HumanMessage("q"), AIMessage(""), ai(call("a")), result("a", "")]
    out = enforce_provider_hygiene(history)
    assert len(out) == 3
    assert out[2].content == "(no output)"
    assert out[2].additional_kwargs[MARKER_KEY]["kind"] == "placeholder"


def test_only_system_messages_need_nothing():
    history = [SystemMessage("s")]
    assert enforce_provider_hygiene(history) is history


THINKING = {"type": "thinking", "thinking": "hm", "signature": "c2ln"}


def test_blank_text_blocks_go_and_reasoning_only_replies_are_dropped():
    history = [
        HumanMessage([{"type": "text", "text": " "}, {"type": "text", "text": "q"}]),
        ai(call("a"), content=" "),
        result("a"),
        AIMessage([THINKING, {"type": "text", "text": ""}]),
        HumanMessage("next"),
        AIMessage([THINKING, {"type": "text", "text": "answer"}]),
    ]
    out = enforce_provider_hygiene(history)
    assert out[0].content == [{"type": "text", "text": "q"}]
    assert out[1].content == "" and out[1].tool_calls == history[1].tool_calls
    assert [m.text for m in out[2:]] == ["ok", "next", "answer"]
    assert out[4] is history[5]  # reasoning with text is kept as is
    assert history[0].content[0] == {"type": "text", "text": " "}  # not mutated
    again = enforce_provider_hygiene(history)
    assert all(a is b for a, b in zip(again, out, strict=True))  # memoised copies
    assert enforce_provider_hygiene(out) is out


def test_consecutive_assistant_turns_are_joined_into_one():
    first = AIMessage("Let me look.", id="a1", additional_kwargs={"x": 1})
    reasoning = AIMessage([THINKING], id="a2")  # nothing to send: dropped first
    second = AIMessage(
        [THINKING, {"type": "text", "text": "Reading it."}],
        tool_calls=[call("c1")],
        id="a3",
        response_metadata={"model": "m"},
    )
    history = [HumanMessage("q", id="h"), first, reasoning, second, result("c1")]
    before = [m.model_dump() for m in history]
    out = enforce_provider_hygiene(history)
    assert [m.model_dump() for m in history] == before  # the input is unchanged
    assert [m.id for m in out] == ["h", "a3", None]
    joined = out[1]
    assert isinstance(joined, AIMessage)
    assert joined.content == [
        THINKING,
        {"type": "text", "text": "Let me look."},
        {"type": "text", "text": "Reading it."},
    ]
    assert joined.tool_calls == second.tool_calls
    assert joined.response_metadata == {"model": "m"}
    assert joined.additional_kwargs == {
        "x": 1,
        MARKER_KEY: {"kind": "merged", "ids": ["a1", "a3"]},
    }
    again = enforce_provider_hygiene(history)
    assert [m.model_dump() for m in again] == [m.model_dump() for m in out]
    assert enforce_provider_hygiene(out) is out


def test_a_run_of_three_text_turns_becomes_one_and_a_user_turn_splits_runs():
    history = [
        HumanMessage("q"),
        AIMessage("one", id="a"),
        AIMessage("two", id="b"),
        AIMessage("three", id="c"),
        HumanMessage("next"),
        AIMessage("four", id="d"),
    ]
    out = enforce_provider_hygiene(history)
    assert [m.id for m in out] == [None, "c", None, "d"]
    assert [b["text"] for b in out[1].content] == ["one", "two", "three"]
    assert out[1].additional_kwargs[MARKER_KEY]["ids"] == ["a", "b", "c"]
    assert out[3] is history[5]
