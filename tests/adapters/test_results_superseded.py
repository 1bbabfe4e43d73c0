"""Superseded reads leave a way back: the pointer names the archived original."""

from __future__ import annotations

import re
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.sqlite import SqliteStore

from langchain_context_guard import (
    MARKER_KEY,
    ContextGuard,
    ContextGuardMiddleware,
    GuardPolicy,
    ResultArchive,
    ToolPolicy,
    make_result_reader,
)
from tests.fakes import ScriptedChatModel, pairing_errors

POINTER = re.compile(r'read_tool_result\("([^"]+)"\)')


def _file(version: int) -> str:
    """The text of a.py at ``version``: long enough to be worth a pointer."""
    rows = [f"# a.py, version {version}", f"SECRET = {4_000 + version}"]
    rows += [f"def f_{i}(): return {i * version}" for i in range(120)]
    return "\n".join(rows)


@tool
def read_file(path: str, version: int) -> str:
    """Read a file as it was at a version."""
    return _file(version)


class ReadsTwiceThenFollows(ScriptedChatModel):
    """Reads a.py twice, then reads the first read back by its pointer."""

    n: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> ReadsTwiceThenFollows:
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        n, self.n = self.n, self.n + 1
        if n < 2:
            args = {"path": "a.py", "version": 1 + n}
            call = {"name": "read_file", "args": args, "id": f"c{n}"}
            return AIMessage("", tool_calls=[call], id=f"ai{n}")
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.tool_call_id == "back":
            found = re.search(r"SECRET = (\d+)", str(last.content))
            return AIMessage(found.group(1) if found else "lost", id="final")
        first = next(
            m for m in messages if isinstance(m, ToolMessage) and m.tool_call_id == "c0"
        )
        pointer = POINTER.search(str(first.content))
        if pointer is None:
            return AIMessage("no pointer", id="final")
        args = {"tool_call_id": pointer.group(1)}
        call = {"name": "read_tool_result", "args": args, "id": "back"}
        return AIMessage("", tool_calls=[call], id="ask")


def _guard() -> ContextGuard:
    return ContextGuard(
        GuardPolicy(
            context_window=16_000,
            reserve_tokens=1_000,
            compress_trigger=0.0,
            stable_prefix=False,
            tool_policies={"read_file": ToolPolicy(supersede_key="path")},
        )
    )


def test_an_agent_reads_a_superseded_read_back_on_sqlite(
    sqlite_store: SqliteStore,
) -> None:
    check_superseded_read_back(sqlite_store)


def check_superseded_read_back(store: Any) -> None:
    """An agent on ``store`` reads a superseded read back by its pointer."""
    model = ReadsTwiceThenFollows(profile={"max_input_tokens": 16_000})
    agent = create_agent(
        model,
        [read_file, make_result_reader()],
        middleware=[ContextGuardMiddleware(_guard(), archive=ResultArchive())],
        checkpointer=InMemorySaver(),
        store=store,
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [("user", "What was SECRET at first?")]}, config)
    asked = model.received[2]
    first = next(m for m in asked if getattr(m, "tool_call_id", "") == "c0")
    mark = first.additional_kwargs[MARKER_KEY]
    assert mark["kind"] == "superseded" and mark["newer"] == "c1"
    assert 'full text: read_tool_result("#1")' in str(first.content)  # c0's key
    assert "SECRET = 4001" not in "\n".join(str(m.content) for m in asked)
    messages = agent.get_state(config).values["messages"]
    back = next(m for m in messages if getattr(m, "tool_call_id", "") == "back")
    assert str(back.content).startswith("[lines 0-122 of 122]\n# a.py, version 1")
    assert messages[-1].content == "4001"
    assert pairing_errors(model.received[-1]) == []
    stored = messages[2]  # the state keeps the original whole
    assert isinstance(stored, ToolMessage) and stored.content == _file(1)

    reader = make_result_reader(store)
    other = reader.invoke(
        {"tool_call_id": "c0"}, config={"configurable": {"thread_id": "u"}}
    )
    assert other.startswith("No archived result for tool_call_id 'c0'")


def test_without_an_archive_the_pointer_names_no_way_back() -> None:
    model = ReadsTwiceThenFollows(profile={"max_input_tokens": 16_000})
    agent = create_agent(
        model,
        [read_file, make_result_reader()],
        middleware=[ContextGuardMiddleware(_guard())],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [("user", "What was SECRET at first?")]}, config)
    first = next(m for m in model.received[2] if getattr(m, "tool_call_id", "") == "c0")
    assert first.additional_kwargs[MARKER_KEY]["kind"] == "superseded"
    assert "read_tool_result" not in str(first.content)
    assert agent.get_state(config).values["messages"][-1].content == "no pointer"
