"""Tests for engine._grown: warm calls read and keep a grown history, no copy."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine.incremental._read_history import read
from langchain_context_guard.engine.tokens._anchor import Known
from langchain_context_guard.engine.tokens._counters import TiktokenCounter
from tests.engine._support import agent_history, ai, call, result, snapshot

COUNTER = TiktokenCounter()


def _policy(**kwargs: object) -> GuardPolicy:
    return GuardPolicy(context_window=16_000, reserve_tokens=2_000, **kwargs)


def _fresh(history: list[BaseMessage], **kwargs: object) -> str:
    out = ContextGuard(_policy(**kwargs), token_counter=COUNTER).prepare(history)
    return snapshot(out.messages) + repr(out.report.tokens_after)


def _call(guard: ContextGuard, history: list[BaseMessage]) -> str:
    out = guard.prepare(history)
    return snapshot(out.messages) + repr(out.report.tokens_after)


def test_the_guard_keeps_one_list_and_every_record_its_own_history() -> None:
    history = agent_history(30)
    guard = ContextGuard(_policy(), token_counter=COUNTER)
    guard.prepare(history[:20])
    first = guard._last
    kept = first.messages
    for k in range(22, 61, 2):
        guard.prepare(history[:k])  # a new list every call, as LangGraph gives
        assert guard._last.messages is kept  # appended to, not copied
        assert guard._last.history() == history[:k]
    assert first.history() == history[:20]  # what an older record covers stays
    assert len(kept) == 60


def test_the_callers_list_is_never_kept_nor_changed() -> None:
    history = agent_history(20)
    guard = ContextGuard(_policy(), token_counter=COUNTER)
    guard.prepare(history[:30])
    mine = history[:32]
    before = list(mine)
    guard.prepare(mine)
    assert guard._last.messages is not mine and mine == before
    assert all(a is b for a, b in zip(mine, before, strict=True))


@pytest.mark.parametrize("stable_prefix", [True, False])
def test_a_list_changed_in_place_after_the_call_is_seen(stable_prefix) -> None:
    # The caller keeps one list, appends to it, and replaces an old message in
    # place: the guard must not have kept that very list.
    history = agent_history(40)
    lived = history[:40]
    guard = ContextGuard(_policy(stable_prefix=stable_prefix), token_counter=COUNTER)
    guard.prepare(lived)
    lived += history[40:42]
    lived[5] = result("c1", "a short result now", id="t1-new")
    assert _call(guard, lived) == _call(
        ContextGuard(_policy(stable_prefix=stable_prefix), token_counter=COUNTER),
        lived,
    )


def test_a_recent_message_edited_in_place_is_seen() -> None:
    history = agent_history(30)
    guard = ContextGuard(_policy(stable_prefix=False), token_counter=COUNTER)
    guard.prepare(history[:50])
    history[45].content = "edited: " + "x" * 3_000  # a new content object
    assert _call(guard, history[:52]) == _fresh(history[:52], stable_prefix=False)


def test_two_conversations_on_one_guard_send_what_each_alone_sends() -> None:
    a = agent_history(30, task="Fix bug A.")
    b = [m.model_copy(update={"id": f"b-{m.id}"}) for m in agent_history(30)]
    b[1] = HumanMessage("Fix bug B.", id="b-task")
    shared = ContextGuard(_policy(), token_counter=COUNTER)
    alone = {
        "a": ContextGuard(_policy(), token_counter=COUNTER),
        "b": ContextGuard(_policy(), token_counter=COUNTER),
    }
    for k in range(20, 61, 2):
        for name, history in (("a", a), ("b", b)):
            assert _call(shared, history[:k]) == _call(alone[name], history[:k])


def test_a_list_another_call_appended_to_is_copied_not_appended_to() -> None:
    history = agent_history(10)
    lock = threading.Lock()
    kept = list(history[:10])
    last = Known(kept, [m.content for m in kept], 0, -1, 0, size=10)
    given = history[:12]
    original, known, rebuilt, held = read(last, given, lock)
    assert original is given  # the caller's list serves during the call
    assert known is last and rebuilt is None and held is kept and len(kept) == 12
    # ``last`` again (as a second thread holding it would): its list has grown.
    branch = [*history[:10], ai(call("x"), id="ax"), result("x", id="tx")]
    original, known, _, held = read(last, branch, lock)
    assert original is branch and known is last and held is not kept
    assert held == branch
    assert kept == history[:12]  # the first call's history is untouched


def test_converted_new_messages_are_read_and_kept() -> None:
    history = agent_history(10)
    guard = ContextGuard(_policy(), token_counter=COUNTER)
    guard.prepare(history)
    grown = [*history, {"role": "user", "content": "Go on."}]
    out = guard.prepare(grown)
    assert isinstance(guard._last.history()[-1], HumanMessage)
    assert out.messages[-1].content == "Go on."
    assert not isinstance(grown[-1], AIMessage | HumanMessage)  # caller's, as given
