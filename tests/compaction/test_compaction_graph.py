"""Compaction as a branch of real graphs, with a SQLite checkpointer."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.store.memory import InMemoryStore

from langchain_context_guard import ConfigError
from langchain_context_guard.compaction import (
    Compactor,
    add_compaction,
    archive_namespace,
    make_recall_tool,
)
from langchain_context_guard.engine._messages import is_summary, marker
from tests.compaction._support import (
    Agent,
    FailingSummarizer,
    HangingSummarizer,
    ScriptedSummarizer,
    build_graph,
    make_guard,
    read_file,
    settings,
    start,
    tool_calling_model,
)
from tests.fakes import pairing_errors

STEPS = 30
WAIT = 120.0
"""Seconds a test waits for an event before failing (never reached when it works)."""
CHARS = 4_000


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(tmp_path / "checkpoints.db", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


def _config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 500}


def _consistent(messages: Sequence[BaseMessage]) -> bool:
    """Never half-compacted: one summary at most, right after the system prompt,
    and no tool result without its call."""
    summaries = [i for i, m in enumerate(messages) if is_summary(m)]
    leading = next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)),
        len(messages),
    )
    if summaries and summaries != [leading]:
        return False
    calls: set[str] = set()
    for m in messages:
        if isinstance(m, AIMessage):
            calls |= {c["id"] or "" for c in m.tool_calls}
        if isinstance(m, ToolMessage) and m.tool_call_id not in calls:
            return False
    return True


def _custom_events(chunks: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [c["context_guard"] for mode, c in chunks if mode == "custom"]


def test_graph_compacts_when_due_and_keeps_the_pre_compaction_checkpoint(
    saver: SqliteSaver,
) -> None:
    guard = make_guard()
    summarizer = ScriptedSummarizer()
    compactor = Compactor(summarizer, settings(), guard=guard)
    agent = Agent(guard, STEPS)
    graph = build_graph(compactor, agent, chars=CHARS).compile(checkpointer=saver)

    chunks = list(graph.stream(start(), _config(), stream_mode=["custom", "updates"]))

    final = graph.get_state(_config()).values["messages"]
    assert final[-1].content == "All done."
    assert isinstance(final[0], SystemMessage) and is_summary(final[1])
    assert pairing_errors(final[2:]) == []
    assert guard.count_tokens(final) < compactor._limits().trigger_tokens
    number = (marker(final[1]) or {})["number"]
    assert number >= 2 and len(summarizer.received) == number
    assert "<previous_summary>" in str(summarizer.received[-1][1].content)
    kinds = [e["kind"] for e in _custom_events(chunks)]
    assert kinds == ["compaction"] * number
    assert max(agent.sent) <= guard.policy.budget(guard.window().tokens)

    history = [s.values["messages"] for s in graph.get_state_history(_config())]
    assert all(_consistent(msgs) for msgs in history)
    pre = [msgs for msgs in history if not any(is_summary(m) for m in msgs)]
    assert max(len(msgs) for msgs in pre) > len(final)
    assert any(m.id == "t-0" for m in max(pre, key=len))


def test_failed_compaction_leaves_state_and_the_call_falls_back(
    saver: SqliteSaver,
) -> None:
    guard = make_guard()
    summarizer = FailingSummarizer()
    compactor = Compactor(summarizer, settings(retries=1), guard=guard)
    agent = Agent(guard, STEPS)
    graph = build_graph(compactor, agent, chars=CHARS).compile(checkpointer=saver)

    chunks = list(graph.stream(start(), _config(), stream_mode=["custom", "updates"]))

    final = graph.get_state(_config()).values["messages"]
    assert not any(is_summary(m) for m in final)
    assert len(final) == 2 + 2 * STEPS + 1  # nothing was removed
    events = _custom_events(chunks)
    assert events and all(e["kind"] == "compaction_failed" for e in events)
    assert "summarizer_error" in events[0]["detail"]
    assert any("compaction skipped" in e["detail"] for e in events)
    assert len(summarizer.received) < STEPS  # paused after max_consecutive failures
    assert max(agent.sent) <= guard.policy.budget(guard.window().tokens)
    updates = [c for mode, c in chunks if mode == "updates" and "compact" in c]
    assert updates and all(not c["compact"] for c in updates)


def test_run_cannot_finish_while_its_compaction_is_in_flight(
    saver: SqliteSaver,
) -> None:
    guard = make_guard()
    summarizer = HangingSummarizer()
    compactor = Compactor(summarizer, settings(timeout=None), guard=guard)
    graph = build_graph(compactor, Agent(guard, STEPS), chars=CHARS).compile(
        checkpointer=saver
    )
    with ThreadPoolExecutor(1) as pool:
        run = pool.submit(graph.invoke, start(), _config(), durability="sync")
        try:
            assert summarizer.started.wait(timeout=WAIT)
            assert not run.done()
            during = graph.get_state(_config())
            assert during.next == ("compact",)
            assert not any(is_summary(m) for m in during.values["messages"])
        finally:
            summarizer.release.set()
        final = run.result(timeout=WAIT)["messages"]
    assert is_summary(final[1]) and final[-1].content == "All done."


async def test_async_run_waits_for_its_compaction(tmp_path: Path) -> None:
    guard = make_guard()
    summarizer = HangingSummarizer()
    compactor = Compactor(summarizer, settings(timeout=None), guard=guard)
    builder = build_graph(compactor, Agent(guard, STEPS), chars=CHARS)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.db")) as saver:
        graph = builder.compile(checkpointer=saver)
        task = asyncio.create_task(graph.ainvoke(start(), _config()))
        # Wait on the event (or the run ending early), with a timeout: never on
        # a count of loop turns, which a loaded machine can exhaust.
        started = asyncio.ensure_future(
            asyncio.to_thread(summarizer.started.wait, WAIT)
        )
        await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
        try:
            assert await asyncio.wait_for(started, WAIT)
            assert not task.done()
        finally:
            summarizer.started.set()  # ends the waiting thread on failure too
            summarizer.release_async()
        final = (await asyncio.wait_for(task, WAIT))["messages"]
    assert is_summary(final[1]) and final[-1].content == "All done."


async def test_client_sees_a_compaction_timeout_mid_run(tmp_path: Path) -> None:
    guard = make_guard()
    summarizer = HangingSummarizer()
    compactor = Compactor(summarizer, settings(timeout=0.2), guard=guard)
    agent = Agent(guard, STEPS)
    builder = build_graph(compactor, agent, chars=CHARS)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "t.db")) as saver:
        graph = builder.compile(checkpointer=saver)
        chunks = [
            c
            async for c in graph.astream(
                start(), _config(), stream_mode=["custom", "updates"]
            )
        ]
        state = await graph.aget_state(_config())
        history = [
            s.values["messages"] async for s in graph.aget_state_history(_config())
        ]

    timeouts = [e for e in _custom_events(chunks) if "timeout" in e["detail"]]
    assert timeouts and timeouts[0]["kind"] == "compaction_failed"
    assert "longer than 0.2 s" in timeouts[0]["detail"]
    assert "State left unchanged" in timeouts[0]["detail"]
    final = state.values["messages"]
    assert final[-1].content == "All done."
    assert len(final) == 2 + 2 * STEPS + 1
    assert not any(is_summary(m) for msgs in history for m in msgs)
    assert max(agent.sent) <= guard.policy.budget(guard.window().tokens)


def test_summarizer_tokens_are_not_streamed(saver: SqliteSaver) -> None:
    guard = make_guard()
    summarizer = ScriptedSummarizer()
    reply = GenericFakeChatModel(messages=iter(["The fix is in place."]))
    compactor = Compactor(summarizer, settings(), guard=guard)
    graph = build_graph(
        compactor, Agent(guard, STEPS, model=reply), chars=CHARS
    ).compile(checkpointer=saver)
    streamed = list(graph.stream(start(), _config(), stream_mode="messages"))
    ai_text = "".join(
        str(m.content) for m, _ in streamed if m.type in {"ai", "AIMessageChunk"}
    )
    assert summarizer.received  # compaction did run
    assert "The fix is in place." in ai_text
    assert "<completed>" not in ai_text and "off-by-one" not in ai_text


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_removed_messages_are_archived_per_thread_and_recallable(
    saver: SqliteSaver, kind: str
) -> None:
    if kind == "memory":
        store: Any = InMemoryStore()
    else:
        sqlite_store = pytest.importorskip("langgraph.store.sqlite")
        conn = sqlite3.connect(
            ":memory:", check_same_thread=False, isolation_level=None
        )
        store = sqlite_store.SqliteStore(conn)
        store.setup()
    guard = make_guard()
    compactor = Compactor(ScriptedSummarizer(), settings(), guard=guard)
    graph = build_graph(compactor, Agent(guard, STEPS), chars=CHARS).compile(
        checkpointer=saver, store=store
    )
    try:
        graph.invoke(start(), _config("archive-thread"))

        archived = store.search(archive_namespace("archive-thread"), limit=500)
        keys = {i.key for i in archived}
        assert {"task", "t-0", "ai-0", "context-guard-summary-1"} <= keys
        final = graph.get_state(_config("archive-thread")).values["messages"]
        live = {m.id for m in final}
        everything = {"sys", "task"} | {f"ai-{k}" for k in range(STEPS)}
        assert everything <= keys | live  # nothing lost
        recall = make_recall_tool(store)
        answer = recall.invoke({"query": "handler_0"}, _config("archive-thread"))
        assert "0000: def handler_0" in answer
        assert "No archive" in make_recall_tool().invoke({"query": "x"}, _config())
    finally:
        if kind == "sqlite":
            conn.close()


def test_add_compaction_needs_an_edge_into_the_node() -> None:
    builder: StateGraph[Any] = StateGraph(dict)
    builder.add_node("agent", lambda s: s)
    with pytest.raises(ConfigError) as info:
        add_compaction(
            builder, before="agent", compactor=Compactor(ScriptedSummarizer())
        )
    assert info.value.field == "before"
    builder.add_edge(START, "agent")
    add_compaction(builder, before="agent", compactor=Compactor(ScriptedSummarizer()))
    assert "compact" in builder.nodes


# -- create_agent ------------------------------------------------------------------


def _agent(summarizer: Any, saver: SqliteSaver, **kwargs: Any) -> tuple[Any, Any]:
    from langchain.agents import create_agent

    from langchain_context_guard.compaction._middleware import CompactionMiddleware

    guard = make_guard()
    model = tool_calling_model(STEPS)
    middleware = CompactionMiddleware(summarizer, settings(**kwargs), guard=guard)
    agent = create_agent(
        model,
        tools=[read_file],
        system_prompt="You are a coding agent.",
        middleware=[middleware],
        checkpointer=saver,
        store=InMemoryStore(),
    )
    return agent, model


def test_create_agent_middleware_compacts(saver: SqliteSaver) -> None:
    summarizer = ScriptedSummarizer()
    agent, model = _agent(summarizer, saver)
    out = agent.invoke({"messages": [("user", "Fix the bug.")]}, _config())
    messages = out["messages"]
    assert is_summary(messages[0]) and pairing_errors(messages[1:]) == []
    assert messages[-1].content == "All done."
    assert summarizer.received
    summary = str(messages[0].content)
    assert "Fix the bug." in summary
    guard = make_guard()
    budget = guard.policy.budget(guard.window().tokens)
    assert max(guard.count_tokens(r) for r in model.received) <= budget


async def test_create_agent_middleware_falls_back_when_compaction_fails(
    tmp_path: Path,
) -> None:
    from langchain.agents import create_agent

    from langchain_context_guard.compaction._middleware import CompactionMiddleware

    guard = make_guard()
    model = tool_calling_model(STEPS)
    middleware = CompactionMiddleware(
        FailingSummarizer(), settings(retries=0), guard=guard, recall=True
    )
    assert [t.name for t in middleware.tools] == ["recall"]
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "f.db")) as saver:
        agent = create_agent(
            model, tools=[read_file], middleware=[middleware], checkpointer=saver
        )
        out = await agent.ainvoke({"messages": [("user", "Fix it.")]}, _config())
    assert not any(is_summary(m) for m in out["messages"])
    assert len(out["messages"]) == 1 + 2 * STEPS + 1
    budget = guard.policy.budget(guard.window().tokens)
    assert max(guard.count_tokens(r) for r in model.received) <= budget


def _bulky_tools(n: int) -> list[Any]:
    """``n`` tools whose schemas weigh ~550 tokens each (real agents' tools do)."""
    from langchain_core.tools import StructuredTool

    def make(k: int) -> Any:
        def run(path: str, pattern: str = "", limit: int = 10) -> str:
            return "ok"

        doc = f"Tool {k}. " + " ".join(f"option{k}_{j} explained." for j in range(150))
        return StructuredTool.from_function(run, name=f"tool_{k}", description=doc)

    return [make(k) for k in range(n)]


@pytest.mark.parametrize("response_format", [None, "tool"], ids=["tools", "+output"])
def test_fallback_counts_the_tools_and_structured_output(
    saver: SqliteSaver, response_format: Any
) -> None:
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ToolStrategy
    from pydantic import BaseModel, Field

    from langchain_context_guard.compaction._middleware import CompactionMiddleware

    class Report(BaseModel):
        """The final report (a long schema, as structured outputs often are)."""

        summary: str = Field(description="What was found. " * 120)

    guard = make_guard()
    model = tool_calling_model(STEPS)
    tools = [read_file, *_bulky_tools(6)]
    middleware = CompactionMiddleware(
        FailingSummarizer(), settings(retries=0), guard=guard
    )
    agent = create_agent(
        model,
        tools=tools,
        system_prompt="You are a coding agent.",
        middleware=[middleware],
        checkpointer=saver,
        response_format=ToolStrategy(Report) if response_format else None,
    )
    agent.invoke({"messages": [("user", "Fix the bug.")]}, _config())
    bound = model.bound_tools
    assert len(bound) == len(tools) + (1 if response_format else 0)
    budget = guard.policy.budget(guard.window().tokens)
    sent = [guard.count_tokens(r, tools=bound) for r in model.received]
    assert max(sent) <= budget
