"""The other ways in, with reasoning on, 60 steps against the stand-ins: no refusal.

``test_reasoning_paths`` runs the plain adapters; this module runs the rest of
what a user wires around them, each with every reasoning setup of ``_reasoning``
at 16k and 32k, the server enforcing the reasoning rules:

- ``guard_node`` in a hand-built ``StateGraph`` (the guarded copy in its own key);
- ``CompactionMiddleware`` before and after ``ContextGuardMiddleware`` (its
  summary requests go to the same server, with the same reasoning model);
- ``usage_notices`` (the note the middleware adds at the end of a prompt);
- provider compaction (Anthropic's ``compact_20260112`` edit, the Responses
  API's ``context_management``; Gemini has none);
- ``cache_ttl_seconds`` with a clock on which every third call comes after the
  cache expired, so those calls prune afresh inside the running loop;
- a thread resumed from a SQLite checkpoint at every step by a new agent and a
  new guard (a worker that restarted);
- two workers with different policies taking turns on one thread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from langchain_context_guard import (
    CompactionMiddleware,
    ContextGuard,
    ContextGuardMiddleware,
    guard_node,
)
from langchain_context_guard.adapters import _clock

from ._reasoning import REASONING, reasoning_model, self_guarded_model
from ._server import ProviderServer
from ._support import SYSTEM, TASK, TOOLS, policy

MakeServer = Callable[..., ProviderServer]
STEPS = 60
WINDOWS = pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])
KINDS = pytest.mark.parametrize("kind", REASONING)
TASK_STATE = {"messages": [HumanMessage(TASK)]}


def _config(thread: str = "run") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 4 * STEPS + 10}


def _server(make_server: MakeServer, window: int) -> ProviderServer:
    return make_server(tool_steps=STEPS, multiplier=1.25, limit=window)


def _agent_calls(server: ProviderServer) -> list[Any]:
    """The accepted requests of the agent (with its tools), not summary requests."""
    return [e for e in server.accepted if _has_tools(e.body)]


def _has_tools(body: dict[str, Any]) -> bool:
    return bool(body.get("tools"))


def _accepted_all(server: ProviderServer, window: int) -> None:
    assert [e.error for e in server.rejections] == []
    calls = _agent_calls(server)
    assert len(server.accepted) == STEPS + 1  # every step, and its final answer
    assert sum(e.tokens for e in calls) > 3 * window  # it pruned


def _agent(model: Any, middleware: list[Any], **graph: Any) -> Any:
    graph.setdefault("checkpointer", InMemorySaver())
    return create_agent(
        model, tools=TOOLS, system_prompt=SYSTEM, middleware=middleware, **graph
    )


class _NodeState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    model_input: list[AnyMessage]


@WINDOWS
@KINDS
def test_guard_node_in_a_state_graph(
    make_server: MakeServer, kind: str, window: int
) -> None:
    server = _server(make_server, window)
    model = self_guarded_model(kind, server)
    bound = model.bind_tools(TOOLS)
    guard = ContextGuard(policy(context_window=window))

    def call_model(state: _NodeState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["model_input"])]}

    def route(state: _NodeState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END  # type: ignore[union-attr]

    graph = StateGraph(_NodeState)
    node = guard_node(guard, output_key="model_input", tools=TOOLS, model=model)
    graph.add_node("guard", node)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "guard")
    graph.add_edge("guard", "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "guard")
    app = graph.compile(checkpointer=InMemorySaver())
    opening = [SystemMessage(SYSTEM), HumanMessage(TASK)]
    app.invoke({"messages": opening}, _config())
    _accepted_all(server, window)


@WINDOWS
@KINDS
@pytest.mark.parametrize("order", ["compaction-first", "guard-first"])
def test_compaction_middleware_beside_the_guard(
    make_server: MakeServer, kind: str, window: int, order: str
) -> None:
    server = _server(make_server, window)
    model = reasoning_model(kind, server)
    guard = ContextGuardMiddleware(ContextGuard(policy(context_window=window)))
    compaction = CompactionMiddleware(
        model,
        trigger=("fraction", 0.6),
        keep=("messages", 12),
        guard=policy(context_window=window),
    )
    pair = [compaction, guard] if order == "compaction-first" else [guard, compaction]
    state = _agent(model, pair).invoke(TASK_STATE, _config())
    assert [e.error for e in server.rejections] == []
    assert not state["messages"][-1].tool_calls  # the agent got its final answer
    summaries = [e for e in server.accepted if not _has_tools(e.body)]
    assert summaries  # the summarizer ran, on the same server, and was accepted
    assert len(_agent_calls(server)) + len(summaries) == len(server.accepted)


@WINDOWS
@KINDS
def test_usage_notices(make_server: MakeServer, kind: str, window: int) -> None:
    server = _server(make_server, window)
    guard = ContextGuard(policy(context_window=window, usage_notices=(0.5, 0.75)))
    model = reasoning_model(kind, server)
    _agent(model, [ContextGuardMiddleware(guard)]).invoke(TASK_STATE, _config())
    _accepted_all(server, window)


@pytest.mark.parametrize(
    ("kind", "window", "multiplier", "trigger"),
    [
        ("responses", 16_000, 1.25, 8_000),
        ("responses", 32_000, 1.25, 16_000),
        ("claude", 200_000, 4.0, 60_000),
    ],
    ids=["responses-16k", "responses-32k", "claude-200k"],
)
def test_provider_compaction(
    make_server: MakeServer, kind: str, window: int, multiplier: float, trigger: int
) -> None:
    """The provider compacts inside the running loop; the guard sends from there.

    Anthropic's trigger is at least 50,000 tokens (the guard warns below it), so
    Claude runs in a 200k window with four provider tokens to each of ours; Claude
    Fable 5.1 is not among the models Anthropic documents compaction for, and
    Gemini has none.
    """
    server = make_server(tool_steps=STEPS, multiplier=multiplier, limit=window)
    guard = ContextGuardMiddleware(
        ContextGuard(policy(context_window=window)), provider_compaction=trigger
    )
    _agent(reasoning_model(kind, server), [guard]).invoke(TASK_STATE, _config())
    assert [e.error for e in server.rejections] == []
    assert len(server.accepted) == STEPS + 1
    assert any(e.compacted for e in server.accepted)


class _Clock:
    """``time`` for the adapters: every third call comes after the cache expired."""

    def __init__(self) -> None:
        self.calls = 0

    def time(self) -> float:
        self.calls += 1
        return self.calls * 10.0 + (self.calls // 3) * 1_000.0


@WINDOWS
@KINDS
def test_cache_ttl_prunes_afresh_on_cold_calls(
    make_server: MakeServer, kind: str, window: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(_clock, "time", clock)
    server = _server(make_server, window)
    guard = ContextGuard(policy(context_window=window, cache_ttl_seconds=300))
    model = reasoning_model(kind, server)
    _agent(model, [ContextGuardMiddleware(guard)]).invoke(TASK_STATE, _config())
    _accepted_all(server, window)
    assert clock.calls >= STEPS  # the middleware read the clock on every call


@pytest.fixture
def saved(tmp_path: Path) -> Iterator[Callable[[], SqliteSaver]]:
    """New SQLite checkpointers on one database file, each its own connection."""
    connections: list[sqlite3.Connection] = []

    def open_saver() -> SqliteSaver:
        connection = sqlite3.connect(tmp_path / "threads.db", check_same_thread=False)
        connections.append(connection)
        return SqliteSaver(connection)

    yield open_saver
    for connection in connections:
        connection.close()


def _step_by_step(make_agent: Callable[[int], Any]) -> int:
    """Run the thread one model call at a time, a new agent for each; the steps."""
    step = 0
    state: dict[str, Any] | None = TASK_STATE
    while True:
        agent = make_agent(step)
        agent.invoke(state, _config("resumed"))
        state = None
        step += 1
        if not agent.get_state(_config("resumed")).next:
            return step
        assert step <= STEPS + 1, "the agent did not finish"


@WINDOWS
@KINDS
def test_a_thread_resumed_from_a_checkpoint_at_every_step(
    make_server: MakeServer,
    kind: str,
    window: int,
    saved: Callable[[], SqliteSaver],
) -> None:
    server = _server(make_server, window)

    def restarted(step: int) -> Any:
        guard = ContextGuardMiddleware(ContextGuard(policy(context_window=window)))
        return _agent(
            reasoning_model(kind, server),
            [guard],
            checkpointer=saved(),
            interrupt_before=["tools"],
        )

    assert _step_by_step(restarted) == STEPS + 1
    _accepted_all(server, window)


@WINDOWS
@KINDS
def test_two_workers_with_different_policies_take_turns_on_one_thread(
    make_server: MakeServer,
    kind: str,
    window: int,
    saved: Callable[[], SqliteSaver],
) -> None:
    server = _server(make_server, window)
    policies = [
        policy(context_window=window),
        policy(
            context_window=window,
            max_tool_result_chars=3_000,
            truncate_head_chars=1_200,
            truncate_tail_chars=600,
            keep_recent_tool_results=2,
            trim_step=0.25,
        ),
    ]
    workers = [
        _agent(
            reasoning_model(kind, server),
            [ContextGuardMiddleware(ContextGuard(p))],
            checkpointer=saved(),
            interrupt_before=["tools"],
        )
        for p in policies
    ]
    assert _step_by_step(lambda step: workers[step % 2]) == STEPS + 1
    _accepted_all(server, window)
