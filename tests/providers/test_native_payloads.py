"""Provider-native blocks through the guard, judged by ChatAnthropic's request body.

Compaction blocks reach the Messages API unchanged, with nothing before them
but the system prompt; and a model that binds each signed thinking block to
the exact request body before it (as newer Claude models do) never receives a
stale one, on any call of a growing agent loop.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from tests.engine._support import (
    ANTHROPIC_COMPACTION,
    agent_history,
    call,
    lines,
    result,
)
from tests.providers._support import anthropic_payload, anthropic_violations


def _blocks(payload: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [
        (j, b)
        for j, m in enumerate(payload["messages"])
        if isinstance(m["content"], list)
        for b in m["content"]
    ]


def test_a_compaction_block_reaches_anthropic_unchanged_and_first():
    history = agent_history(12, result_chars=3_000)
    compacted = AIMessage([ANTHROPIC_COMPACTION], id="compacted")
    history = [*history, compacted, HumanMessage("Go on.", id="next")]
    history += agent_history(4)[2:]
    sent = ContextGuard(GuardPolicy(context_window=16_000)).prepare(history).messages
    payload = anthropic_payload(sent)
    assert anthropic_violations(payload) == []
    found = [(j, b) for j, b in _blocks(payload) if b["type"] == "compaction"]
    assert found == [(1, ANTHROPIC_COMPACTION)]  # after the placeholder turn only
    assert payload["system"] == history[0].content


FABLE = "claude-fable-5-1"
"""A model that binds its thinking blocks to their prefix."""


def _signature(payload: dict[str, Any], upto: int) -> str:
    """What the model binds a block to: the system prompt and messages before it."""
    prefix = [payload.get("system"), payload["messages"][:upto]]
    return hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()


def _as_read(payload: dict[str, Any], final: int, dropped: list[Any]) -> dict[str, Any]:
    """``payload`` less the stale blocks the API dropped (our reading: a reply
    is bound to what its model saw)."""
    if not dropped:
        return payload
    messages = list(payload["messages"])
    content = [b for b in messages[final]["content"] if b not in dropped]
    messages[final] = {**messages[final], "content": content}
    return {**payload, "messages": messages}


@pytest.mark.parametrize("stable", [True, False])
def test_anthropic_never_receives_a_signed_block_bound_to_another_prefix(stable):
    """A binding model; a stale block in the loop's final turn is drop_block's."""
    policy = GuardPolicy(context_window=16_000, stable_prefix=stable, model=FABLE)
    guard = ContextGuard(policy)
    history: list[BaseMessage] = agent_history(0)
    kept = 0
    for k in range(50):
        payload = anthropic_payload(guard.prepare(history).messages)
        assert anthropic_violations(payload) == []
        final = len(payload["messages"]) - 2  # a running loop's final turn
        dropped = []
        for j, block in _blocks(payload):
            if block["type"] == "thinking":
                valid = block["signature"] == _signature(payload, j)
                assert valid or j == final  # a stale final turn's: drop_block's
                kept += 1
                if not valid:
                    dropped.append(block)
        read = _as_read(payload, final, dropped)  # what the model saw
        thinking = {
            "type": "thinking",
            "thinking": f"step {k}",
            "signature": _signature(read, len(read["messages"])),
        }
        reply = AIMessage(
            [thinking, {"type": "text", "text": f"running {k}"}],
            tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")],
            id=f"a{k}",
        )
        body = lines(60 + 40 * (k % 3), prefix=f"r{k}")
        history = [*history, reply, result(f"c{k}", body, id=f"t{k}")]
    assert kept > 50  # blocks before any edit stay
