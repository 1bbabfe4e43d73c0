"""``ContextGuardMiddleware`` alone learns from a silent overflow.

It cannot retry the call (``OverflowRecoveryMiddleware`` does), but it learns the
limit scaled by how the provider counted, so the next calls are pruned under it.
The scripted model answers anything and reports 1.6 tokens for each of ours.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from tests.recovery._support import filler
from tests.recovery.test_recovery_silent import WINDOW, DenseCountModel, policy


@tool
def bash(cmd: str) -> str:
    """Run a shell command and return its output."""
    return filler(1_500, seed=len(cmd))


class DenseToolModel(DenseCountModel):
    """Calls ``bash`` once per reply script entry; binds tools to itself."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> DenseToolModel:
        return self


def test_later_calls_fit_once_a_silent_overflow_was_seen(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls = [
        AIMessage(
            "", tool_calls=[{"name": "bash", "args": {"cmd": "x" * k}, "id": f"c{k}"}]
        )
        for k in range(1, 25)
    ]
    model = DenseToolModel(
        messages=iter([*calls, "done"]), profile={"max_input_tokens": WINDOW}
    )
    middleware = ContextGuardMiddleware(policy())
    agent = create_agent(model, [bash], middleware=[middleware])
    with caplog.at_level(logging.WARNING, logger="langchain_context_guard"):
        agent.invoke({"messages": [HumanMessage("go")]}, {"recursion_limit": 100})
    over = [i for i, tokens in enumerate(model.reported) if tokens > WINDOW]
    assert len(over) == 1  # the first overflow, then never again
    assert max(model.reported[over[0] + 1 :]) <= WINDOW
    assert len(model.reported[over[0] + 1 :]) > 10  # the history kept growing
    window = middleware.guard.window(model)
    assert window.source == "learned" and window.tokens < WINDOW
    assert "later calls are pruned under a learned limit" in caplog.text
