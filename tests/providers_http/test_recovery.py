"""Overflow recovery against the stand-in providers, the guard's window set too high.

The guard believes the model takes 64,000 tokens; the server refuses anything
over 16,000 with the provider's real error. The recovery must read the limit
from that error, retry the call fitted to it, and keep later calls under it:
one refusal, then the run completes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    OverflowRecoveryMiddleware,
    with_overflow_recovery,
)

from ._server import ProviderServer
from ._support import (
    PROVIDERS,
    QUIET_RETIREMENT,
    SYSTEM,
    TASK,
    TOOLS,
    WINDOW,
    chat_model,
    lcel_loop,
    policy,
)

pytestmark = QUIET_RETIREMENT
MakeServer = Callable[..., ProviderServer]
STEPS = 20
FINAL = f"Done: the answer after {STEPS} tool calls."
TOO_HIGH = 4 * WINDOW


def assert_recovered(server: ProviderServer, guard: ContextGuard, model: Any) -> None:
    """One refusal, the limit learned from it, every later call accepted."""
    assert [e.verdict for e in server.rejections] == ["too_long"]
    assert server.exchanges[-1].verdict == "ok"
    assert len(server.accepted) == STEPS + 1
    window = guard.window(model)
    assert window.source == "learned" and window.tokens <= WINDOW


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_middleware_recovers_from_a_window_set_too_high(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS)
    guard = ContextGuard(policy(context_window=TOO_HIGH))
    model = chat_model(provider, server)
    agent = create_agent(
        model,
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(guard), OverflowRecoveryMiddleware(guard)],
        checkpointer=InMemorySaver(),
    )
    config: dict[str, Any] = {
        "configurable": {"thread_id": "run"},
        "recursion_limit": 4 * STEPS + 10,
    }
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    assert result["messages"][-1].text == FINAL
    assert_recovered(server, guard, model)


@pytest.mark.parametrize(
    "provider",
    ["openai", "anthropic"],
)
def test_with_overflow_recovery_recovers_from_a_window_set_too_high(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS)
    guard = ContextGuard(policy(context_window=TOO_HIGH))
    model = chat_model(provider, server)
    recovering = with_overflow_recovery(model.bind_tools(TOOLS), guard)
    history = lcel_loop(recovering, ids=True)
    assert history[-1].text == FINAL
    assert_recovered(server, guard, model)
