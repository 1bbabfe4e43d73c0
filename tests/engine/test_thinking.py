import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

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


BIG_THOUGHT = "let me think about this carefully. " * 400


def _over_by_reasoning(form: str) -> list:
    if form == "blocks":
        thought = {"type": "thinking", "thinking": BIG_THOUGHT, "signature": "c2ln"}
        answer = AIMessage(
            [thought, {"type": "text", "text": "The answer is 42."}], id="a"
        )
    elif form == "reasoning":
        thought = {"type": "reasoning", "reasoning": BIG_THOUGHT}
        answer = AIMessage(
            [thought, {"type": "text", "text": "The answer is 42."}], id="a"
        )
    else:
        answer = AIMessage(
            "The answer is 42.",
            additional_kwargs={"reasoning_content": BIG_THOUGHT},
            id="a",
        )
    return [
        SystemMessage("You are terse.", id="s"),
        HumanMessage("What is six times seven?", id="u"),
        answer,
        HumanMessage("Thanks. And six times eight?", id="u2"),
    ]


@pytest.mark.parametrize("form", ["blocks", "reasoning", "kwargs"])
@pytest.mark.parametrize("stable", [True, False], ids=["stable", "plain"])
def test_the_newest_answer_loses_its_reasoning_before_the_answer(form, stable):
    from langchain_context_guard import ContextGuard, GuardPolicy

    history = _over_by_reasoning(form)
    policy = GuardPolicy(
        context_window=3_000,
        reserve_tokens=500,
        hard_min_tokens=0,
        warn_below_tokens=0,
        stable_prefix=stable,
    )
    guard = ContextGuard(policy)
    assert guard.count_tokens(history) > policy.budget(3_000)  # with the reasoning
    before = snapshot(history)
    out = guard.prepare(history).messages
    assert snapshot(history) == before
    assert [m.id for m in out] == ["s", "u", "a", "u2"]
    assert out[2].text == "The answer is 42."
    assert BIG_THOUGHT not in str(out[2].content)
    assert "reasoning_content" not in out[2].additional_kwargs
    assert ContextGuard(policy).prepare(out).messages == out


@pytest.mark.parametrize("form", ["blocks", "reasoning", "kwargs"])
def test_trim_to_budget_strips_the_newest_reasoning_before_dropping_it(form):
    from langchain_context_guard import TiktokenCounter, trim_to_budget

    history = _over_by_reasoning(form)
    count = TiktokenCounter().count_message
    budget = 2_000
    assert sum(map(count, history)) > budget
    out = trim_to_budget(history, budget=budget, token_counter=count)
    assert [m.id for m in out] == ["s", "u", "a", "u2"]
    assert out[2].text == "The answer is 42."
    assert not any(
        isinstance(b, dict) and b.get("type") in {"thinking", "reasoning"}
        for b in out[2].content
    )
    assert "reasoning_content" not in out[2].additional_kwargs
    assert sum(map(count, out)) <= budget
