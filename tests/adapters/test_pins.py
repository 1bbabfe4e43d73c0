"""The model pins a result with ``pin_message``; it stays verbatim, in its thread."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver

from langchain_context_guard import ConfigError, is_pinned, make_pin_tools
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from tests.adapters._support import SYSTEM, WINDOW, make_guard, read_note
from tests.fakes import ScriptedChatModel, pairing_errors

NOTES = 40
PIN_FIRST = "Read the notes; pin the first one, I will ask about it."


class PinsTheFirstNote(ScriptedChatModel):
    """Reads ``NOTES`` notes; pins the first when the user asks it to."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> PinsTheFirstNote:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        last = messages[-1]
        pinning = any(
            isinstance(m, HumanMessage) and m.content == PIN_FIRST for m in messages
        )
        if isinstance(last, HumanMessage):
            return _read(0)
        assert isinstance(last, ToolMessage)
        if last.tool_call_id == "pin":
            return _read(1)
        k = int(last.tool_call_id[1:])
        if k == 0 and pinning:
            call = {"name": "pin_message", "args": {"message_id": "n0"}, "id": "pin"}
            return AIMessage("", tool_calls=[call], id="ai-pin")
        if k + 1 < NOTES:
            return _read(k + 1)
        return AIMessage("Done.", id="final")


def _read(k: int) -> AIMessage:
    call = {"name": "read_note", "args": {"k": k + 1}, "id": f"n{k}"}
    return AIMessage("", tool_calls=[call], id=f"ai{k}")


@pytest.fixture
def saver() -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    yield SqliteSaver(conn)
    conn.close()


def _run(agent: Any, thread: str, question: str) -> list[BaseMessage]:
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 200}
    agent.invoke({"messages": [("user", question)]}, config)
    return list(agent.get_state(config).values["messages"])


def test_the_model_pins_a_result_that_then_stays_verbatim_on_sqlite(saver):
    check_pins_stay(saver)


def check_pins_stay(checkpointer: Any) -> None:
    """An agent on ``checkpointer`` pins a result that then stays verbatim."""
    model = PinsTheFirstNote(profile={"max_input_tokens": WINDOW})
    middleware = ContextGuardMiddleware(make_guard(), pin_tools=True)
    agent = create_agent(
        model,
        [read_note],
        system_prompt=SYSTEM,
        middleware=[middleware],
        checkpointer=checkpointer,
    )
    state = _run(agent, "pinned", PIN_FIRST)
    note = next(
        m for m in state if isinstance(m, ToolMessage) and m.tool_call_id == "n0"
    )
    assert is_pinned(note) and note.content == read_note.invoke({"k": 1})
    answer = next(m for m in state if getattr(m, "tool_call_id", "") == "pin")
    assert answer.content.startswith("Pinned n0")
    guard = middleware.guard
    budget = guard.budget(model)
    after_pin = model.received[2:]
    assert len(after_pin) == NOTES
    for request in after_pin:
        sent = [m for m in request if isinstance(m, ToolMessage)]
        assert sent[0].tool_call_id == "n0" and sent[0].content == note.content
        assert pairing_errors(request) == []
        assert sum(map(guard.counter.count_message, request)) <= budget
    last = {m.tool_call_id for m in after_pin[-1] if isinstance(m, ToolMessage)}
    assert "n1" not in last  # the notes read after it were trimmed

    # Pins never cross threads: the same calls in another thread are not pinned.
    other = _run(agent, "plain", "Read the notes.")
    assert not any(map(is_pinned, other))
    first = [m for m in model.received[-1] if getattr(m, "tool_call_id", "") == "n0"]
    assert all(m.content != note.content for m in first)  # shortened or dropped
    again = _run(agent, "pinned", "And now?")  # the pin is still in its checkpoint
    assert is_pinned(next(m for m in again if m.id == note.id))


def test_unpin_message_releases_and_a_bad_id_is_answered_not_raised():
    pin_tool, unpin_tool = make_pin_tools(max_pins=1)
    messages = [
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage("one", tool_call_id="c1", id="t1"),
        AIMessage("", tool_calls=[{"name": "x", "args": {}, "id": "c2"}], id="a2"),
        ToolMessage("two", tool_call_id="c2", id="t2"),
    ]

    def call(tool: Any, ref: str, state: list[BaseMessage]) -> Any:
        return tool.invoke(
            {
                "type": "tool_call",
                "name": tool.name,
                "id": "me",
                "args": {"message_id": ref, "state": {"messages": state}},
            }
        )

    pinned = call(pin_tool, "c1", messages).update["messages"]
    assert [m.id for m in pinned[:-1]] == ["t1"] and is_pinned(pinned[0])
    state = [messages[0], pinned[0], *messages[2:]]
    refused = call(pin_tool, "c2", state).update["messages"]
    assert len(refused) == 1 and "at most 1" in refused[0].content
    released = call(unpin_tool, "t1", state).update["messages"]
    assert not is_pinned(released[0]) and released[0].content == "one"
    missing = call(pin_tool, "nowhere", state).update["messages"]
    assert missing[0].status == "error" and "tool_call_id" in missing[0].content


@pytest.mark.parametrize("value", [0, -2, 1.5, "yes"])
def test_pin_tools_takes_a_bool_or_a_positive_cap(value):
    with pytest.raises(ConfigError, match="pin_tools"):
        ContextGuardMiddleware(pin_tools=value)
    assert len(ContextGuardMiddleware(pin_tools=3).tools) == 2
