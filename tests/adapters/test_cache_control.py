"""Anthropic cache breakpoints on the guard's output, judged by ChatAnthropic."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    GuardPolicy,
    mark_cache_breakpoints,
)
from tests.fakes import ScriptedToolModel, tool_history
from tests.providers._support import (
    anthropic_payload,
    anthropic_violations,
    cache_breakpoints,
)

EPHEMERAL = {"type": "ephemeral"}


def _history(steps: int) -> list[Any]:
    return tool_history(steps, lambda k: f"output {k} " * 400)


def test_breakpoints_on_system_last_unchanged_and_last_message() -> None:
    guard = ContextGuard(GuardPolicy(context_window=16_000, reserve_tokens=2_000))
    history = _history(6)
    guard.prepare(history[:-2])
    result = guard.prepare(history)
    reused = result.report.reused
    assert 2 < reused < len(result.messages)
    marked = mark_cache_breakpoints(result.messages, reused)
    payload = anthropic_payload(marked)
    assert anthropic_violations(payload) == []
    found = cache_breakpoints(payload)
    assert found[0][0] == "system"
    assert len(found) == 3
    # The last unchanged message (an assistant tool call) and the last message.
    unchanged = result.messages[reused - 1]
    assert isinstance(unchanged, (AIMessage, ToolMessage))
    assert found[-1][1] == len(payload["messages"]) - 1
    assert history[-1].content == "output 5 " * 400  # inputs untouched
    assert all(not isinstance(m.content, list) for m in history[1:2])


def test_at_most_four_and_never_on_thinking_or_empty_blocks() -> None:
    messages = [
        SystemMessage("sys"),
        HumanMessage("task"),
        AIMessage([{"type": "thinking", "thinking": "hm", "signature": "c2ln"}]),
        AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "c1"}]),
        ToolMessage("ok", tool_call_id="c1"),
    ]
    marked = mark_cache_breakpoints(messages, 3, control={**EPHEMERAL, "ttl": "1h"})
    assert marked[2] is messages[2]  # thinking cannot carry it: handed back
    assert marked[1] is not messages[1]
    assert len(cache_breakpoints(anthropic_payload(marked))) == 3
    assert mark_cache_breakpoints([], 0) == []
    many = mark_cache_breakpoints([SystemMessage("a"), SystemMessage("b")], 2)
    assert sum("cache_control" in str(m.content) for m in many) <= 4


@tool
def read_chunk(k: int) -> str:
    """Read chunk ``k``."""
    return f"chunk {k}: " + "data " * 600


def test_middleware_option_marks_every_model_request() -> None:
    model = ScriptedToolModel(steps=30)
    guard = ContextGuard(GuardPolicy(context_window=16_000, reserve_tokens=2_000))
    agent = create_agent(
        model,
        [read_chunk],
        system_prompt="You read chunks.",
        middleware=[ContextGuardMiddleware(guard, cache_breakpoints=True)],
    )
    agent.invoke({"messages": [HumanMessage("Read them all.")]})
    assert len(model.received) == 31
    for sent in model.received:
        payload = anthropic_payload(sent)
        assert anthropic_violations(payload) == []
        found = cache_breakpoints(payload)
        assert 2 <= len(found) <= 4
        assert found[0][0] == "system"
        assert found[-1][1] == len(payload["messages"]) - 1
