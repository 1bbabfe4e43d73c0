"""Guarded agents with thinking or reasoning on, against the stand-ins: no refusal.

A ``create_agent`` agent with the guard's middleware runs a few tool steps with
each reasoning setup of ``_reasoning`` (Claude thinking, a Claude model that
binds its thinking to its prefix, OpenAI Responses reasoning, Gemini thought
signatures). The history stays well inside the window, so the guard has nothing
to prune: every request must be one the provider accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from anthropic import BadRequestError
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ContextGuard, ContextGuardMiddleware

from ._reasoning import REASONING, reasoning_model
from ._server import ProviderServer
from ._support import SYSTEM, TASK, TOOLS, policy

MakeServer = Callable[..., ProviderServer]
STEPS = 4
CONFIG: dict[str, Any] = {
    "configurable": {"thread_id": "run"},
    "recursion_limit": 4 * STEPS + 10,
}


@pytest.mark.parametrize("kind", REASONING)
def test_a_guarded_reasoning_agent_runs_without_a_refusal(
    make_server: MakeServer, kind: str
) -> None:
    server = make_server(tool_steps=STEPS)
    agent = create_agent(
        reasoning_model(kind, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(ContextGuard(policy()))],
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert [e.error for e in server.rejections] == []
    assert len(server.accepted) == STEPS + 1
    final = result["messages"][-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.text.endswith(f"Done: the answer after {STEPS} tool calls.")
    assert max(e.tokens for e in server.accepted) < policy().context_window // 2


PRUNED_STEPS = 20
STRIPPED = pytest.mark.xfail(
    strict=True,
    raises=BadRequestError,
    reason="the guard strips the running tool loop's thinking block when it prunes: "
    "the server answers 'messages.N.content.0.type: Expected `thinking` or "
    "`redacted_thinking`, but found `text`' at the first pruned request",
)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("claude", marks=STRIPPED),
        pytest.param("claude-binding", marks=STRIPPED),
        "responses",
        "gemini",
    ],
)
def test_a_guarded_reasoning_agent_prunes_without_a_refusal(
    make_server: MakeServer, kind: str
) -> None:
    server = make_server(tool_steps=PRUNED_STEPS, multiplier=1.25)
    agent = create_agent(
        reasoning_model(kind, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(ContextGuard(policy()))],
        checkpointer=InMemorySaver(),
    )
    config = {**CONFIG, "recursion_limit": 4 * PRUNED_STEPS + 10}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    assert [e.error for e in server.rejections] == []
    assert len(server.accepted) == PRUNED_STEPS + 1
    assert max(e.tokens for e in server.accepted) > 0.6 * policy().context_window
