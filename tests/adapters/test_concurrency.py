"""One guard shared by threads, tasks and concurrent graph runs gives the same
results as a fresh guard used from one thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import ContextGuard, PrepareResult
from langchain_context_guard.adapters._langgraph import pre_model_hook
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._runnable import as_runnable
from tests.adapters._support import (
    SYSTEM,
    TOOLS,
    WINDOW,
    check_model_input,
    long_history,
    make_guard,
)
from tests.fakes import ScriptedToolModel

BASE = long_history(60)
THREADS = ["t0", "t1", "t2"]
STEPS = 20


def _histories() -> list[list[BaseMessage]]:
    """Overlapping histories: growing prefixes, some with a new user turn."""
    out: list[list[BaseMessage]] = []
    for k in range(4, 60, 4):
        prefix = BASE[: 2 + 2 * k]
        out.append(prefix)
        out.append([*prefix, HumanMessage(f"Follow-up {k}", id=f"follow_{k}")])
    return out


HISTORIES = _histories()


def _order_free_guard() -> ContextGuard:
    """A guard in the order-free mode (``stable_prefix=False``).

    With ``stable_prefix`` a guard answers a history by what it sent before in
    that conversation, so results depend on the call order by design; these tests
    interleave prefixes of one conversation and compare results (the graph runs
    below keep the default).
    """
    return make_guard(stable_prefix=False)


def _reference() -> list[PrepareResult]:
    fresh = _order_free_guard()
    return [fresh.prepare(h, tools=TOOLS) for h in HISTORIES]


@pytest.fixture(scope="module")
def expected() -> list[PrepareResult]:
    return _reference()


def test_threads_sharing_one_guard_match_single_threaded(
    expected: list[PrepareResult],
) -> None:
    shared = _order_free_guard()
    order = [i for _ in range(3) for i in range(len(HISTORIES))]
    order = order[::2] + order[1::2]  # interleave so the same history races itself
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(
            pool.map(lambda i: shared.prepare(HISTORIES[i], tools=TOOLS), order)
        )
    for i, result in zip(order, results, strict=True):
        assert result.messages == expected[i].messages
        assert result.report == expected[i].report


async def test_gathered_adapters_sharing_one_guard_match(
    expected: list[PrepareResult],
) -> None:
    shared = _order_free_guard()
    runnable = as_runnable(shared, tools=TOOLS)
    hook = pre_model_hook(shared, tools=TOOLS)
    outs = await asyncio.gather(
        *(runnable.ainvoke(h) for h in HISTORIES),
        *(hook.ainvoke({"messages": h}) for h in HISTORIES),
    )
    n = len(HISTORIES)
    for i in range(n):
        assert outs[i] == expected[i].messages
        assert outs[n + i]["llm_input_messages"] == expected[i].messages


def _shape(messages: list[BaseMessage]) -> list[tuple[str, str, Any]]:
    """Messages without the random ids a graph assigns to tool results."""
    return [(m.type, m.text, getattr(m, "tool_call_id", None)) for m in messages]


def _react_run(guard: ContextGuard, thread: str) -> list[list[Any]]:
    model = ScriptedToolModel(steps=STEPS)
    hook = pre_model_hook(guard, tools=TOOLS, system_prompt=SYSTEM)
    agent = create_react_agent(model, TOOLS, prompt=SYSTEM, pre_model_hook=hook)
    user = f"Task {thread}: read the chunks."
    agent.invoke({"messages": [("user", user)]}, {"recursion_limit": 1_000})
    for received in model.received:
        check_model_input(guard, received, user_text=user, tools=TOOLS)
    return [_shape(r) for r in model.received]


def test_concurrent_graph_runs_in_threads_share_one_guard() -> None:
    alone = [_react_run(make_guard(), t) for t in THREADS]
    shared = make_guard()
    with ThreadPoolExecutor(max_workers=len(THREADS)) as pool:
        together = list(pool.map(lambda t: _react_run(shared, t), THREADS))
    assert together == alone


async def _agent_run(guard: ContextGuard, saver: Any, thread: str) -> list[Any]:
    model = ScriptedToolModel(steps=STEPS, profile={"max_input_tokens": WINDOW})
    agent = create_agent(
        model,
        TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(guard)],
        checkpointer=saver,
    )
    config: Any = {"configurable": {"thread_id": thread}, "recursion_limit": 500}
    user = f"Task {thread}: read the chunks."
    await agent.ainvoke({"messages": [("user", user)]}, config)
    for received in model.received:
        check_model_input(guard, received, user_text=user, tools=TOOLS)
    return [_shape(r) for r in model.received]


async def test_concurrent_async_agents_share_one_guard() -> None:
    alone = [await _agent_run(make_guard(), None, t) for t in THREADS]
    shared, saver = make_guard(), InMemorySaver()
    together = await asyncio.gather(*(_agent_run(shared, saver, t) for t in THREADS))
    assert together == alone
