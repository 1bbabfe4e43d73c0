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
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ContextGuard, ContextGuardMiddleware

from ._reasoning import REASONING, reasoning_model
from ._rules_anthropic import BINDING_BETA
from ._server import ProviderServer
from ._support import SYSTEM, TASK, TOOLS, opening, policy, run_tools

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


@pytest.mark.parametrize("kind", REASONING)
@pytest.mark.parametrize(
    "digest",
    [{}, {"digest": True, "digest_form": "turns"}],
    ids=["defaults", "turns-digest"],
)
def test_a_guarded_reasoning_agent_prunes_without_a_refusal(
    make_server: MakeServer, kind: str, digest: dict[str, Any]
) -> None:
    server = make_server(tool_steps=PRUNED_STEPS, multiplier=1.25)
    agent = create_agent(
        reasoning_model(kind, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(ContextGuard(policy(**digest)))],
        checkpointer=InMemorySaver(),
    )
    config = {**CONFIG, "recursion_limit": 4 * PRUNED_STEPS + 10}
    agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    assert [e.error for e in server.rejections] == []
    assert len(server.accepted) == PRUNED_STEPS + 1
    assert max(e.tokens for e in server.accepted) > 0.6 * policy().context_window
    if digest:  # each trimmed turn carries its signed reasoning: none is cut down
        cleared = "output cleared by context guard"
        assert not any(cleared in str(e.body) for e in server.accepted)


def test_a_dropped_block_reaches_the_client_as_an_input_transformation(
    make_server: MakeServer,
) -> None:
    server = make_server(tool_steps=3)
    drop = {
        "type": "adaptive",
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    model = reasoning_model(
        "claude-binding", server, thinking=drop, betas=[BINDING_BETA]
    ).bind_tools(TOOLS)
    history = opening(ids=False)
    for _ in range(2):
        reply = model.invoke(history)
        history += [reply, *run_tools(reply, ids=False)]
    assert reply.response_metadata["input_transformations"] == []
    first = history[3]
    history[3] = ToolMessage("[cut]", tool_call_id=first.tool_call_id)  # an edit
    reply = model.invoke(history)
    assert reply.response_metadata["input_transformations"] == [
        {
            "type": "thinking_dropped",
            "reason": "prefix_binding_mismatch",
            "path": "messages.3.content.0",
        }
    ]
    assert server.rejections == []
    assert [len(e.dropped) for e in server.exchanges] == [0, 0, 1]
