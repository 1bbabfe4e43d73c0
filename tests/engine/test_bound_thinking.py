"""Signed reasoning is sent only behind the very prefix that produced it."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from langchain_context_guard.engine.incremental._steps import opens_with_user
from langchain_context_guard.engine.passes._bound_thinking import (
    drop_stale_thinking,
    is_signed,
)
from langchain_context_guard.engine.passes._hygiene import enforce_provider_hygiene
from langchain_context_guard.engine.passes._provider_compaction import (
    drop_before_compaction,
)
from langchain_context_guard.engine.passes._repair import repair_tool_pairs
from langchain_context_guard.engine.passes._sanitize import sanitize_messages
from tests.engine._support import agent_history, call, result, snapshot, transcripts
from tests.engine.test_reference import COUNTER, POLICIES, SETTINGS, assert_reference


def _signed_at(messages: list[BaseMessage]) -> list[tuple[int, object]]:
    return [
        (i, b)
        for i, m in enumerate(messages)
        if isinstance(m, AIMessage) and isinstance(m.content, list)
        for b in m.content
        if is_signed(b)
    ]


def _prefix_of(messages: list[BaseMessage], block: object) -> list[BaseMessage]:
    """The messages before the one holding ``block`` (compared by identity)."""
    for i, m in enumerate(messages):
        if isinstance(m.content, list) and any(b is block for b in m.content):
            return messages[:i]
    raise AssertionError("not in the history")


def test_only_the_blocks_after_an_edit_go():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    redacted = {"type": "redacted_thinking", "data": "ZZ"}
    history: list[BaseMessage] = [
        HumanMessage("task", id="u"),
        AIMessage([thinking, {"type": "text", "text": "one"}], id="a"),
        HumanMessage("more", id="v"),
        AIMessage([redacted, {"type": "text", "text": "two"}], id="b"),
    ]
    assert drop_stale_thinking(history, history) is history
    edited = [*history[:2], HumanMessage("more, shorter", id="v"), history[3]]
    out = drop_stale_thinking(edited, history)
    assert out[1] is history[1]  # before the edit: kept
    assert out[3].content == [{"type": "text", "text": "two"}]
    assert history[3].content[0] == redacted  # the caller's message is not mutated


def test_a_message_edited_after_its_block_keeps_it():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    was = AIMessage([thinking, {"type": "text", "text": "long " * 50}], id="a")
    now = was.model_copy(update={"content": [thinking, {"type": "text", "text": "x"}]})
    task = HumanMessage("q")
    out = drop_stale_thinking([task, now], [task, was])
    assert out[1].content[0] == thinking


def _sent(guard: ContextGuard, history: list[BaseMessage]) -> list[BaseMessage] | None:
    try:
        return guard.prepare(history).messages
    except BudgetExceededError:
        return None


@SETTINGS
@given(transcripts(usage=True, native=True), POLICIES, st.data())
def test_every_kept_signed_block_has_its_original_prefix(history, policy, data):
    start = data.draw(st.integers(1, len(history)))
    ends = sorted({start, *data.draw(st.lists(st.integers(start, len(history))))})
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in ends:
        lived = history[:n]
        assert_reference(guard, lived)
        sent = _sent(guard, lived)
        if sent is None:
            continue
        # The history as sent unedited: read, repaired and shaped like ``sent``.
        read = repair_tool_pairs(drop_before_compaction(sanitize_messages(lived)))
        whole = enforce_provider_hygiene(read, removed=opens_with_user(read))
        for i, block in _signed_at(sent):
            assert snapshot(sent[:i]) == snapshot(_prefix_of(whole, block))


def _signature(prompt: list[BaseMessage]) -> str:
    return hashlib.sha256(snapshot(prompt).encode()).hexdigest()


@pytest.mark.parametrize("stable", [True, False])
def test_an_agent_whose_model_binds_thinking_never_gets_a_stale_block(stable):
    """The model signs each reply with its prompt; every sent block must match."""
    policy = GuardPolicy(context_window=16_000, stable_prefix=stable)
    guard = ContextGuard(policy, token_counter=COUNTER)
    history: list[BaseMessage] = agent_history(0)
    kept = dropped = 0
    for k in range(45):
        prompt = guard.prepare(history).messages
        for i, block in _signed_at(prompt):
            assert block["signature"] == _signature(prompt[:i])
        kept += len(_signed_at(prompt))
        dropped += sum(
            isinstance(m, AIMessage) and not any(map(is_signed, m.content))
            for m in prompt
        )
        thinking = {"type": "thinking", "thinking": f"step {k}", "signature": ""}
        thinking["signature"] = _signature(prompt)
        reply = AIMessage(
            [thinking, {"type": "text", "text": f"running {k}"}],
            tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")],
            id=f"a{k}",
        )
        history = [*history, reply, result(f"c{k}", "line\n" * 300, id=f"t{k}")]
    assert kept and dropped  # some blocks went with the edits, some stayed


def test_a_warm_call_grows_the_steps_after_the_bound_thinking_check():
    guard = ContextGuard(GuardPolicy(stable_prefix=False), token_counter=COUNTER)
    history = agent_history(20, result_chars=200)
    guard.prepare(history[:30])
    guard.prepare(history)
    assert guard._record is not None
    steps = {s.kind: s for s in guard._record.steps}
    assert steps["bound_thinking"].grown and steps["hygiene"].grown
