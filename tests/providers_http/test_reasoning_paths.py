"""Every adapter path, with reasoning on, 60 steps against the stand-ins: no refusal.

Each reasoning setup of ``_reasoning`` (Claude thinking, a Claude model that binds
its thinking to its prefix, OpenAI Responses reasoning items, Gemini thought
signatures) runs a 60-step tool loop at a 16k and a 32k window through each way
in: ``ContextGuardMiddleware`` (alone and with ``OverflowRecoveryMiddleware``),
``pre_model_hook`` and an LCEL step. The results add up to several windows, so
the guard prunes inside the running loop many times. The server enforces the
reasoning rules; every request must be accepted. With a binding model, the paths
other than the middleware ask for ``drop_block`` on the model themselves, as
docs/providers.md says (the middleware asks for it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    as_runnable,
    pre_model_hook,
)
from langchain_context_guard.recovery import OverflowRecoveryMiddleware

from ._reasoning import REASONING, reasoning_model, self_guarded_model
from ._server import ProviderServer
from ._support import SYSTEM, TASK, TOOLS, lcel_loop, policy

MakeServer = Callable[..., ProviderServer]
STEPS = 60
PATHS = ("middleware", "middleware+recovery", "pre_model_hook", "lcel")


def _model(kind: str, server: ProviderServer, path: str) -> Any:
    if path.startswith("middleware"):
        return reasoning_model(kind, server)
    return self_guarded_model(kind, server)


def _run(path: str, kind: str, server: ProviderServer, window: int) -> None:
    guard = ContextGuard(policy(context_window=window))
    model = _model(kind, server, path)
    config: dict[str, Any] = {
        "configurable": {"thread_id": "run"},
        "recursion_limit": 4 * STEPS + 10,
    }
    task = {"messages": [HumanMessage(TASK)]}
    if path.startswith("middleware"):
        middleware: list[Any] = [ContextGuardMiddleware(guard)]
        if path == "middleware+recovery":
            middleware.append(OverflowRecoveryMiddleware(guard))
        agent = create_agent(
            model,
            tools=TOOLS,
            system_prompt=SYSTEM,
            middleware=middleware,
            checkpointer=InMemorySaver(),
        )
        agent.invoke(task, config)
    elif path == "pre_model_hook":
        hook = pre_model_hook(guard, system_prompt=SYSTEM, tools=TOOLS, model=model)
        agent = create_react_agent(
            model,
            TOOLS,
            prompt=SYSTEM,
            pre_model_hook=hook,
            checkpointer=InMemorySaver(),
        )
        agent.invoke(task, config)
    else:
        chain = as_runnable(guard, tools=TOOLS, model=model)
        lcel_loop(chain | model.bind_tools(TOOLS), ids=True, max_calls=STEPS + 5)


@pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])
@pytest.mark.parametrize("kind", REASONING)
@pytest.mark.parametrize("path", PATHS)
def test_every_path_with_reasoning_on_is_accepted_over_60_steps(
    make_server: MakeServer, path: str, kind: str, window: int
) -> None:
    server = make_server(tool_steps=STEPS, multiplier=1.25, limit=window)
    _run(path, kind, server, window)
    assert [e.error for e in server.rejections] == []
    assert len(server.accepted) == STEPS + 1
    assert sum(e.tokens for e in server.accepted) > 3 * window  # it pruned
