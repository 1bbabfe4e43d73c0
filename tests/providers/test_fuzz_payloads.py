"""Messy histories through the guard, judged by the providers' request builders."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import marker
from tests.engine._support import snapshot
from tests.providers._support import histories, violations

SETTINGS = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _sent(history, window=16_000):
    try:
        return (
            ContextGuard(GuardPolicy(context_window=window)).prepare(history).messages
        )
    except BudgetExceededError:
        return None


@SETTINGS
@given(histories(adjacent=True))
def test_guarded_histories_satisfy_every_provider(history):
    sent = _sent(history)
    if sent is not None:
        assert violations(sent) == {}


@SETTINGS
@given(histories(adjacent=True), st.booleans())
def test_a_growing_history_satisfies_every_provider_on_each_call(history, stable):
    guard = ContextGuard(GuardPolicy(context_window=16_000, stable_prefix=stable))
    for k in range(1, len(history) + 1):
        try:
            sent = guard.prepare(history[:k]).messages
        except BudgetExceededError:
            continue
        assert violations(sent) == {}


def test_blank_text_blocks_and_reasoning_only_replies_are_not_sent():
    history = [
        SystemMessage("sys"),
        HumanMessage([{"type": "text", "text": ""}, {"type": "text", "text": "go"}]),
        AIMessage(" ", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}]),
        ToolMessage("ok", tool_call_id="c1"),
        AIMessage([{"type": "thinking", "thinking": "hm", "signature": "c2ln"}]),
        HumanMessage("next"),
    ]
    assert violations(history) != {}
    sent = _sent(history)
    assert sent is not None
    assert violations(sent) == {}
    assert [type(m).__name__ for m in sent] == [
        "SystemMessage",
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "HumanMessage",
    ]
    assert sent[1].content == [{"type": "text", "text": "go"}]
    assert sent[2].content == ""


HISTORY = [
    HumanMessage("go", id="h"),
    AIMessage("thinking aloud", id="a1", response_metadata={"n": 1}),
    AIMessage(
        [{"type": "thinking", "thinking": "hm", "signature": "c2ln"}],
        tool_calls=[{"name": "bash", "args": {}, "id": "c1"}],
        id="a2",
        response_metadata={"n": 2},
    ),
    ToolMessage("ok", tool_call_id="c1", id="t1"),
]


@pytest.mark.parametrize("bound", [True, False], ids=["bound", "unbound"])
@pytest.mark.parametrize("stable", [True, False], ids=["stable", "pruned"])
def test_two_assistant_turns_in_a_row_reach_every_provider_as_one(stable, bound):
    """Anthropic wants roles to alternate and Gemini rejects a function call right
    after a model turn: the guard joins the turns (their text, the reasoning
    first, the second's calls, id and metadata), as the provider would read them,
    without touching the caller's messages. The second calls tools, so its
    signed reasoning stays first even with ``bound_thinking``: a running loop's
    final turn must start with it."""
    history = [m.model_copy(deep=True) for m in HISTORY]
    before = snapshot(history)
    assert violations(history) != {}  # as given, two providers refuse it
    policy = GuardPolicy(
        context_window=16_000, stable_prefix=stable, bound_thinking=bound
    )
    guard = ContextGuard(policy)
    sent = guard.prepare(history).messages
    assert violations(sent) == {}
    assert snapshot(history) == before
    assert [m.id for m in sent] == ["h", "a2", "t1"]
    joined = sent[1]
    assert isinstance(joined, AIMessage)
    reasoning = [HISTORY[2].content[0]]
    assert joined.content == [*reasoning, {"type": "text", "text": "thinking aloud"}]
    assert joined.tool_calls == HISTORY[2].tool_calls
    assert joined.response_metadata == {"n": 2}
    assert marker(joined) == {"kind": "merged", "ids": ["a1", "a2"]}
    assert guard.prepare(sent).messages == sent  # prepared again: unchanged
    hygiene = [e for e in guard.prepare(history).report.events if e.kind == "hygiene"]
    if not stable:  # (a stable prompt sent again whole reports nothing new)
        assert hygiene and hygiene[0].removed == ("a1",)


def _kept(sent: list[BaseMessage]) -> list[str]:
    """A prompt as the provider reads it, less results made for open calls (the
    real ones take their place on the next call)."""
    while sent and (marker(sent[-1]) or {}).get("kind") == "synthetic_result":
        sent = sent[:-1]
    return [snapshot([m]) for m in sent]


@pytest.mark.parametrize("stable", [True, False], ids=["stable", "pruned"])
def test_a_join_on_a_growing_history_keeps_the_prefix_byte_identical(stable):
    """Called as the history grows (a turn is sent alone, then joined with the
    next), every prompt is valid and is what a fresh guard sends, and what the
    previous call sent is sent again byte for byte, but for the joined turn."""
    history = [SystemMessage("sys", id="sys"), *HISTORY, HumanMessage("next", id="n")]
    history += [
        AIMessage("I will look.", id="a3"),
        AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c2"}], id="a4"),
        ToolMessage("ok", tool_call_id="c2", id="t2"),
    ]
    policy = GuardPolicy(context_window=16_000, stable_prefix=stable)
    guard = ContextGuard(policy)
    previous: list[str] = []
    for k in range(1, len(history) + 1):
        sent = guard.prepare(history[:k]).messages
        assert violations(sent) == {}
        fresh = ContextGuard(policy).prepare(history[:k]).messages
        assert snapshot(sent) == snapshot(fresh)
        now = [snapshot([m]) for m in sent]
        same = [a == b for a, b in zip(previous, now, strict=False)]
        joined = isinstance(history[k - 1], AIMessage) and isinstance(
            history[k - 2], AIMessage
        )
        assert all(same[:-1] if joined else same), k
        assert joined == (len(same) > 0 and not same[-1]), k
        previous = _kept(sent)


def test_a_repeated_call_id_in_one_message_reaches_anthropic_once():
    from tests.providers._support import anthropic_payload

    use = {"type": "tool_use", "id": "c1", "name": "bash", "input": {"cmd": "ls"}}
    call = {"name": "bash", "args": {"cmd": "ls"}, "id": "c1", "type": "tool_call"}
    for message in (
        AIMessage([{"type": "text", "text": "run"}, use, dict(use)], tool_calls=[call]),
        AIMessage("run", tool_calls=[call, dict(call)]),
    ):
        history = [
            HumanMessage("hi"),
            message,
            ToolMessage("out", tool_call_id="c1"),
            HumanMessage("next"),
        ]
        sent = ContextGuard().prepare(history).messages
        assert violations(sent) == {}
        payload = anthropic_payload(sent)
        ids = [
            b["id"]
            for m in payload["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        ]
        assert ids == ["c1"]
