"""Guarded agents against the stand-in providers over HTTP: no request refused.

Each run makes 20 tool calls whose results together hold about three times the
16,000-token window the server enforces; the guard is set to the same window.
The real clients (``ChatOpenAI``, ``ChatAnthropic``) send every request, and the
server counts it with cl100k times a multiplier (1.25 unless a test says
otherwise: a provider that counts denser than the guard's tokenizer) and checks
the tool pairing. A run passes when it completes, the server refused nothing,
and the history sent unpruned would not have fitted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    as_runnable,
    guarded_model,
    pre_model_hook,
)

from ._server import ProviderServer
from ._support import (
    PROVIDERS,
    QUIET_RETIREMENT,
    SYSTEM,
    TASK,
    TOOLS,
    WINDOW,
    alcel_loop,
    chat_model,
    lcel_loop,
    policy,
    provider_tokens,
)

pytestmark = QUIET_RETIREMENT
MakeServer = Callable[..., ProviderServer]
STEPS = 20
DENSER = 1.25
CONFIG: dict[str, Any] = {
    "configurable": {"thread_id": "run"},
    "recursion_limit": 4 * STEPS + 10,
}


def assert_guarded_run(
    server: ProviderServer,
    provider: str,
    history: list[BaseMessage],
    steps: int = STEPS,
) -> None:
    """The run completed, nothing was refused, and pruning was needed."""
    assert server.rejections == []
    assert len(server.accepted) == steps + 1
    final = history[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert final.text == f"Done: the answer after {steps} tool calls."
    model = chat_model(provider, server)
    unpruned = provider_tokens(provider, model, history, server.multiplier)
    assert unpruned > 2 * WINDOW
    assert max(e.tokens for e in server.accepted) > 0.6 * WINDOW


def _whole_state(result: dict[str, Any]) -> list[BaseMessage]:
    messages: list[BaseMessage] = result["messages"]
    assert len(messages) == 1 + 2 * STEPS + 1  # the state keeps every message
    return messages


def _agent(provider: str, server: ProviderServer) -> Any:
    return create_agent(
        chat_model(provider, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(ContextGuard(policy()))],
        checkpointer=InMemorySaver(),
    )


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unguarded_agent_is_refused(make_server: MakeServer, provider: str) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    agent = create_agent(
        chat_model(provider, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
    )
    with pytest.raises(Exception, match="16000"):
        agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert [e.verdict for e in server.rejections] == ["too_long"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("multiplier", [1.0, DENSER])
def test_create_agent_with_the_middleware(
    make_server: MakeServer, provider: str, multiplier: float
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=multiplier)
    result = _agent(provider, server).invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert_guarded_run(server, provider, _whole_state(result))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_create_agent_with_the_turns_digest(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    turns = policy(digest=True, digest_form="turns")
    agent = create_agent(
        chat_model(provider, server),
        tools=TOOLS,
        system_prompt=SYSTEM,
        middleware=[ContextGuardMiddleware(ContextGuard(turns))],
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert_guarded_run(server, provider, _whole_state(result))
    cleared = "output cleared by context guard"
    assert any(cleared in str(e.body) for e in server.accepted)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_create_agent_with_the_middleware_async(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    agent = _agent(provider, server)
    result = asyncio.run(agent.ainvoke({"messages": [HumanMessage(TASK)]}, CONFIG))
    assert_guarded_run(server, provider, _whole_state(result))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_react_agent_with_the_pre_model_hook(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    model = chat_model(provider, server)
    hook = pre_model_hook(
        ContextGuard(policy()), system_prompt=SYSTEM, tools=TOOLS, model=model
    )
    agent = create_react_agent(
        model,
        TOOLS,
        prompt=SYSTEM,
        pre_model_hook=hook,
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert_guarded_run(server, provider, _whole_state(result))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_react_agent_with_the_guarded_model(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    model = chat_model(provider, server)
    agent = create_react_agent(
        guarded_model(ContextGuard(policy()), model, tools=TOOLS),
        TOOLS,
        prompt=SYSTEM,
        checkpointer=InMemorySaver(),
    )
    result = agent.invoke({"messages": [HumanMessage(TASK)]}, CONFIG)
    assert_guarded_run(server, provider, _whole_state(result))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    ("streaming", "multiplier"),
    [(False, 1.0), (False, DENSER), (True, DENSER)],
    ids=["json-1.0", "json-1.25", "sse-1.25"],
)
def test_lcel_loop_with_message_ids(
    make_server: MakeServer, provider: str, streaming: bool, multiplier: float
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=multiplier)
    settings: dict[str, Any] = {"streaming": streaming}
    if provider == "openai":
        settings["stream_usage"] = True
    model = chat_model(provider, server, **settings)
    chain = as_runnable(ContextGuard(policy()), tools=TOOLS, model=model)
    history = lcel_loop(chain | model.bind_tools(TOOLS), ids=True)
    assert_guarded_run(server, provider, history)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_lcel_loop_async(make_server: MakeServer, provider: str) -> None:
    server = make_server(tool_steps=STEPS, multiplier=DENSER)
    model = chat_model(provider, server)
    chain = as_runnable(ContextGuard(policy()), tools=TOOLS, model=model)
    history = asyncio.run(alcel_loop(chain | model.bind_tools(TOOLS), ids=True))
    assert_guarded_run(server, provider, history)


@pytest.mark.parametrize(
    "provider",
    ["openai", "anthropic"],
)
def test_lcel_loop_without_message_ids_for_40_steps(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(tool_steps=40, multiplier=DENSER)
    model = chat_model(provider, server)
    chain = as_runnable(ContextGuard(policy()), tools=TOOLS, model=model)
    history = lcel_loop(chain | model.bind_tools(TOOLS), ids=False)
    assert not any(m.id for m in history if not isinstance(m, AIMessage))
    assert_guarded_run(server, provider, history, steps=40)
