"""The adapters and the compaction branch on a real PostgreSQL server."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import SystemMessage
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._cut import cut_results
from langchain_context_guard.adapters._langgraph import pre_model_hook
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._results import ResultArchive
from langchain_context_guard.compaction import (
    Compactor,
    archive_namespace,
    make_recall_tool,
)
from langchain_context_guard.engine._messages import is_summary
from tests.adapters._support import (
    RESERVE,
    SYSTEM,
    TOOLS,
    WINDOW,
    check_model_input,
    full_length,
)
from tests.adapters._support import make_guard as adapter_guard
from tests.adapters.test_result_search import check_answered_from_the_archive
from tests.adapters.test_result_search import run_agent as run_search_agent
from tests.adapters.test_results import check_read_back, run_agent
from tests.adapters.test_turn_archive import check_turn_read_back, run_turn_agent
from tests.compaction._support import (
    Agent,
    ScriptedSummarizer,
    build_graph,
    settings,
    start,
)
from tests.compaction._support import make_guard as compaction_guard
from tests.fakes import ScriptedToolModel, pairing_errors
from tests.postgres._support import apostgres, postgres

USER = "Read every chunk, then summarise the repository."
STEPS = 30


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1_000}


def _guard() -> ContextGuard:
    return ContextGuard(GuardPolicy(reserve_tokens=RESERVE, warn_below_tokens=16_000))


def _agent(
    guard: ContextGuard, model: ScriptedToolModel, saver: Any, store: Any
) -> Any:
    return create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(guard)],
        checkpointer=saver,
        store=store,
    )


def test_create_agent_on_postgres_prunes_each_call_and_resumes(pg_url: str) -> None:
    guard = _guard()
    model = ScriptedToolModel(steps=STEPS, profile={"max_input_tokens": WINDOW})
    with postgres(pg_url) as (saver, store):
        agent = _agent(guard, model, saver, store)
        out = agent.invoke({"messages": [("user", USER)]}, _config("t"))
        stored = agent.get_state(_config("t")).values["messages"]
    assert len(model.received) == STEPS + 1
    for received in model.received:
        check_model_input(guard, received, user_text=USER, tools=TOOLS)
    assert len(out["messages"]) == len(stored) == full_length(STEPS)
    assert [m.id for m in stored] == [m.id for m in out["messages"]]
    # a new process (fresh guard, model and connections) continues the thread
    guard2 = _guard()
    model2 = ScriptedToolModel(steps=5, profile={"max_input_tokens": WINDOW})
    with postgres(pg_url) as (saver, store):
        agent = _agent(guard2, model2, saver, store)
        out = agent.invoke({"messages": [("user", "Now the tests.")]}, _config("t"))
    assert len(out["messages"]) == full_length(STEPS) + full_length(5)
    for received in model2.received:
        check_model_input(guard2, received, user_text="Now the tests.", tools=TOOLS)


async def test_react_agent_hook_on_async_postgres(pg_url: str) -> None:
    guard = ContextGuard(
        GuardPolicy(
            context_window=WINDOW, reserve_tokens=RESERVE, warn_below_tokens=16_000
        )
    )
    model = ScriptedToolModel(steps=STEPS)
    hook = pre_model_hook(guard, tools=TOOLS, system_prompt=SYSTEM)
    async with apostgres(pg_url) as (saver, store):
        agent = create_react_agent(
            model,
            TOOLS,
            prompt=SYSTEM,
            pre_model_hook=hook,
            checkpointer=saver,
            store=store,
        )
        out = await agent.ainvoke({"messages": [("user", USER)]}, _config("a"))
        state = await agent.aget_state(_config("a"))
    assert len(model.received) == STEPS + 1
    for received in model.received:
        check_model_input(guard, received, user_text=USER, tools=TOOLS)
    assert len(state.values["messages"]) == full_length(STEPS)
    assert [m.id for m in state.values["messages"]] == [m.id for m in out["messages"]]


def test_compaction_branch_on_postgres_archives_and_recalls(pg_url: str) -> None:
    guard = compaction_guard()
    summarizer = ScriptedSummarizer()
    compactor = Compactor(summarizer, settings(), guard=guard)
    with postgres(pg_url) as (saver, store):
        graph = build_graph(compactor, Agent(guard, STEPS), chars=4_000).compile(
            checkpointer=saver, store=store
        )
        graph.invoke(start(), _config("c"))
        final = graph.get_state(_config("c")).values["messages"]
        archived = store.search(archive_namespace("c"), limit=500)
        answer = make_recall_tool(store).invoke({"query": "handler_0"}, _config("c"))
    assert summarizer.received
    assert is_summary(final[1]) and pairing_errors(final[2:]) == []
    keys = {i.key for i in archived}
    live = {m.id for m in final}
    assert {"sys", "task"} | {f"ai-{k}" for k in range(STEPS)} <= keys | live
    assert "0000: def handler_0" in answer


def test_agent_reads_back_a_truncated_result_from_postgres_store(pg_url: str) -> None:
    with postgres(pg_url) as (_saver, store):
        model, out = run_agent(store)
        check_read_back(model, out, store)
        # the same prompt again (a retry in another process) writes nothing new
        history = [SystemMessage(SYSTEM), *out["messages"][:3]]  # task, c0, result
        after = adapter_guard().prepare(history).messages
        assert cut_results(history, after)  # the guard shortens it again...
        config: Any = {"configurable": {"thread_id": "t"}}
        assert ResultArchive(store).save(history, after, config) == 0  # ...no write


def test_agent_answers_about_a_trimmed_result_from_postgres_store(pg_url: str) -> None:
    with postgres(pg_url) as (_saver, store):
        model, messages = run_search_agent(store)
        check_answered_from_the_archive(model, messages, store)


def test_agent_reads_back_a_trimmed_turn_from_postgres_store(pg_url: str) -> None:
    with postgres(pg_url) as (_saver, store):
        check_turn_read_back(run_turn_agent(store))
