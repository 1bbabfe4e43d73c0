"""Pins: a pinned message is sent verbatim, with its pair, until it is released."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    InvalidInputError,
    TiktokenCounter,
    is_pinned,
    pin,
    pin_update,
    trim_to_budget,
    unpin,
)
from langchain_context_guard.engine import reference_prepare
from langchain_context_guard.engine._messages import with_marker
from tests.engine._support import agent_history, fresh_like, snapshot

COUNTER = TiktokenCounter()


def _pinned_at(history: list[BaseMessage], ids: set[str]) -> list[BaseMessage]:
    return [pin(m) if m.id in ids else m for m in history]


def test_pin_and_unpin_return_copies_and_leave_the_message_alone():
    message = ToolMessage("output", tool_call_id="c1", id="t1")
    before = snapshot([message])
    pinned = pin(message)
    assert is_pinned(pinned) and not is_pinned(message)
    assert pinned.content == "output" and pinned.id == "t1"
    assert pin(pinned) is pinned
    released = unpin(pinned)
    assert not is_pinned(released) and released.additional_kwargs == {}
    assert unpin(message) is message
    assert snapshot([message]) == before


def test_pin_refuses_a_message_the_guard_wrote():
    summary = with_marker(HumanMessage("summary"), "summary")
    with pytest.raises(InvalidInputError, match="summary"):
        pin(summary)


def test_pin_update_pins_by_message_id_or_tool_call_id_for_add_messages():
    history = agent_history(3)
    update = pin_update(history, ["t0", "c2"])
    assert [m.id for m in update["messages"]] == ["t0", "t2"]
    assert all(map(is_pinned, update["messages"]))
    again = pin_update(update["messages"], ["t0"], release=True)["messages"]
    assert [m.id for m in again] == ["t0"] and not is_pinned(again[0])
    with pytest.raises(InvalidInputError, match="tool_call_id"):
        pin_update(history, ["nowhere"])


def test_a_pinned_early_result_survives_a_60_step_loop_at_16k_verbatim():
    history = _pinned_at(agent_history(60, result_chars=6_000), {"t1"})
    kept = next(m for m in history if m.id == "t1")
    guard = ContextGuard(
        GuardPolicy(context_window=16_000, reserve_tokens=2_000),
        token_counter=COUNTER,
    )
    trimmed = 0
    for n in range(6, len(history) + 1, 2):
        result = guard.prepare(history[:n])
        sent = result.messages
        at = next(i for i, m in enumerate(sent) if m.id == "t1")
        assert sent[at] is kept  # verbatim: the very message given
        call = sent[at - 1]
        assert isinstance(call, AIMessage) and call.tool_calls[0]["id"] == "c1"
        assert result.report.tokens_after <= result.report.budget
        calls = {
            c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls
        }
        answered = {m.tool_call_id for m in sent if isinstance(m, ToolMessage)}
        assert calls == answered  # every pair whole
        trimmed += len(sent) < n
    assert trimmed > 20  # the loop did outgrow the budget


def test_releasing_a_pin_lets_the_trim_drop_it():
    history = _pinned_at(agent_history(60, result_chars=6_000), {"t1"})
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    guard = ContextGuard(policy, token_counter=COUNTER)
    assert "t1" in {m.id for m in guard.prepare(history).messages}
    released = [unpin(m) for m in history]
    sent = ContextGuard(policy, token_counter=COUNTER).prepare(released).messages
    assert "t1" not in {m.id for m in sent}
    assert "t1" not in {m.id for m in guard.prepare(released).messages}


def test_a_pinned_assistant_message_keeps_all_its_results():
    history = agent_history(40, result_chars=6_000)
    history[4] = AIMessage(
        "",
        tool_calls=[
            {"name": "shell", "args": {"cmd": "a"}, "id": "c1"},
            {"name": "shell", "args": {"cmd": "b"}, "id": "c1b"},
        ],
        id="a1",
    )
    history.insert(6, ToolMessage("second output", tool_call_id="c1b", id="t1b"))
    history = _pinned_at(history, {"a1"})
    sent = (
        ContextGuard(
            GuardPolicy(context_window=16_000, reserve_tokens=2_000),
            token_counter=COUNTER,
        )
        .prepare(history)
        .messages
    )
    ids = [m.id for m in sent]
    assert ids[ids.index("a1") : ids.index("a1") + 3] == ["a1", "t1", "t1b"]
    assert len(sent) < len(history)


@pytest.mark.parametrize("window", [16_000, 24_000])
def test_prepare_is_the_reference_with_pins(window):
    history = _pinned_at(
        agent_history(50, result_chars=6_000), {"t0", "a7", "t8", "t20", "task"}
    )
    guard = ContextGuard(
        GuardPolicy(context_window=window, reserve_tokens=2_000, stable_prefix=False),
        token_counter=COUNTER,
    )
    for n in range(6, len(history) + 1, 5):
        expected = snapshot(reference_prepare(fresh_like(guard), history[:n]))
        assert snapshot(guard.prepare(history[:n]).messages) == expected


def test_pins_that_cannot_fit_raise_a_budget_error_that_names_the_fix():
    history = agent_history(12, result_chars=8_000)
    history = _pinned_at(history, {f"t{k}" for k in range(8)})
    guard = ContextGuard(
        GuardPolicy(context_window=16_000, reserve_tokens=2_000),
        token_counter=COUNTER,
    )
    with pytest.raises(BudgetExceededError, match="unpin") as caught:
        guard.prepare(history)
    assert caught.value.pinned == 8
    assert caught.value.pinned_tokens > caught.value.budget


def test_trim_to_budget_keeps_pins_too():
    history = _pinned_at(agent_history(30, result_chars=2_000), {"t2"})
    out = trim_to_budget(history, budget=6_000, token_counter=COUNTER.count_message)
    assert len(out) < len(history)
    assert [m.id for m in out if m.id in {"a2", "t2"}] == ["a2", "t2"]
