"""Anthropic's server-side compaction, asked by the middleware, over HTTP.

The stand-in server compacts a request that carries the ``compact_20260112`` edit
(and its beta header) once its input reaches the edit's trigger: the reply starts
with a ``compaction`` block. The agent keeps that reply in its state, and the
guard sends every later request from the block on.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ContextGuardMiddleware

from . import _rules as rules
from ._server import ProviderServer
from ._support import SYSTEM, TASK, TOOLS

STEPS = 20
TRIGGER = 60_000
CONFIG: dict[str, Any] = {
    "configurable": {"thread_id": "run"},
    "recursion_limit": 4 * STEPS + 10,
}


def _run(server: ProviderServer) -> list[Any]:
    model = ChatAnthropic(  # type: ignore[call-arg]
        model="claude-sonnet-4-6",
        base_url=server.url,
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,
    )
    guard = ContextGuardMiddleware(
        context_window=200_000, reserve_tokens=2_000, provider_compaction=TRIGGER
    )
    agent = create_agent(
        model,
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[guard],
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    return list(result["messages"])


def test_a_compaction_block_is_kept_and_later_requests_start_from_it(
    make_server: Any,
) -> None:
    # Four provider tokens to each of ours: the trigger is reached mid-run.
    server: ProviderServer = make_server(
        limit=200_000, multiplier=4.0, tool_steps=STEPS
    )
    state = _run(server)
    assert server.rejections == []
    assert len(server.accepted) == STEPS + 1
    for exchange in server.accepted:  # the option and its beta on every request
        assert rules.compaction_trigger(exchange.body) == TRIGGER
        assert "compact-2026-01-12" in exchange.betas.split(",")
    compacted = [i for i, e in enumerate(server.accepted) if e.compacted]
    assert compacted and compacted[0] < STEPS  # the provider compacted mid-run
    first = compacted[0]
    # The reply with the block is in the agent's state, block first.
    kept = [
        m
        for m in state
        if isinstance(m, AIMessage)
        and isinstance(m.content, list)
        and m.content[0].get("type") == "compaction"
    ]
    assert len(kept) == len(compacted)
    # The next request is sent from the block on: only the turn the guard puts
    # before it (a request starts with a user turn) precedes it.
    before, after = server.accepted[first], server.accepted[first + 1]
    messages = after.body["messages"]
    assert rules.latest_compaction(messages) == 1
    assert messages[1]["content"][0]["type"] == "compaction"
    assert len(messages) < len(before.body["messages"])
    assert after.tokens < before.tokens
