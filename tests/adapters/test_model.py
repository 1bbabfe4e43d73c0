"""guarded_model: the guard inside create_react_agent's model call."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import ConfigError, ContextGuard
from langchain_context_guard.adapters import guarded_model
from langchain_context_guard.engine.incremental._handover import STATE_KEY
from tests.adapters._support import SYSTEM, TOOLS, check_model_input, full_length
from tests.adapters._support import make_guard as _make_guard
from tests.fakes import ScriptedToolModel

USER = "Read every chunk, then summarise the repository."
STEPS = 40


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1_000}


def _agent(guard: ContextGuard | None, model: ScriptedToolModel, saver: Any) -> Any:
    chosen: Any = model if guard is None else guarded_model(guard, model, tools=TOOLS)
    return create_react_agent(chosen, TOOLS, prompt=SYSTEM, checkpointer=saver)


def _checkpoints(saver: InMemorySaver, thread: str) -> int:
    return len(list(saver.list(_config(thread))))


def test_prunes_each_call_without_a_step_or_a_stored_copy() -> None:
    guard = _make_guard()
    model = ScriptedToolModel(steps=STEPS)
    saver = InMemorySaver()
    out = _agent(guard, model, saver).invoke(
        {"messages": [("user", USER)]}, _config("t")
    )
    assert len(out["messages"]) == full_length(STEPS)  # the history is whole
    assert model.bound_tools == TOOLS
    for received in model.received:
        check_model_input(guard, received, user_text=USER, tools=TOOLS)
    assert max(len(r) for r in model.received) < full_length(STEPS) // 2
    # each reply carries the small handover record, and the graph has no extra step
    replies = [m for m in out["messages"] if m.type == "ai"]
    assert all(STATE_KEY in m.response_metadata for m in replies)
    plain_saver = InMemorySaver()
    _agent(None, ScriptedToolModel(steps=STEPS), plain_saver).invoke(
        {"messages": [("user", USER)]}, _config("t")
    )
    assert _checkpoints(saver, "t") == _checkpoints(plain_saver, "t")
    assert set(out) == {"messages"}


def test_a_fresh_guard_resumes_with_the_same_prompt() -> None:
    saver = InMemorySaver()
    one = ScriptedToolModel(steps=STEPS)
    _agent(_make_guard(), one, saver).invoke(
        {"messages": [("user", USER)]}, _config("a")
    )
    again = ScriptedToolModel(steps=1)
    _agent(_make_guard(), again, saver).invoke(
        {"messages": [("user", "Now the tests.")]}, _config("a")
    )
    same = ScriptedToolModel(steps=1)
    kept = _make_guard()
    resumed = InMemorySaver()
    _agent(kept, ScriptedToolModel(steps=STEPS), resumed).invoke(
        {"messages": [("user", USER)]}, _config("a")
    )
    _agent(kept, same, resumed).invoke(
        {"messages": [("user", "Now the tests.")]}, _config("a")
    )
    # the restarted process sends what the one that served the thread sends
    assert [m.text for m in again.received[0]] == [m.text for m in same.received[0]]


async def test_async_prunes_too() -> None:
    guard = _make_guard()
    model = ScriptedToolModel(steps=STEPS)
    out = await _agent(guard, model, InMemorySaver()).ainvoke(
        {"messages": [("user", USER)]}, _config("t")
    )
    assert len(out["messages"]) == full_length(STEPS)
    for received in model.received:
        check_model_input(guard, received, user_text=USER, tools=TOOLS)


def test_a_model_name_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match="chat model object"):
        guarded_model(_make_guard(), "openai:gpt-4.1")


def test_a_string_is_one_user_message_and_a_lone_message_is_refused() -> None:
    from langchain_core.messages import HumanMessage

    from langchain_context_guard import InvalidInputError

    model = ScriptedToolModel(steps=1)
    runnable = guarded_model(_make_guard(), model)({"messages": []}, None)
    runnable.invoke("hello")
    assert [m.content for m in model.received[0]] == ["hello"]
    with pytest.raises(InvalidInputError, match="Expected a sequence"):
        runnable.invoke(HumanMessage("hi"))


def test_junk_handover_records_in_replies_are_ignored() -> None:
    from langchain_core.messages import AIMessage, HumanMessage

    def history(record: Any) -> list[Any]:
        reply = AIMessage("Done.", id="a1", response_metadata={STATE_KEY: record})
        return [HumanMessage(USER, id="u1"), reply, HumanMessage("More?", id="u2")]

    sent = []
    for record in ({}, {"ratio": float("inf"), "sent": [], "base": 10**20}):
        model = ScriptedToolModel(steps=1)
        guarded_model(_make_guard(), model)({"messages": []}, None).invoke(
            history(record)
        )
        sent.append([m.text for m in model.received[0]])
    assert sent[0] == sent[1]
