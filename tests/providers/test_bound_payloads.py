"""Signed reasoning as a binding model sees it, in ChatAnthropic's request body.

The model here signs each block of its reply with the request that produced it:
the system prompt, the messages, and the blocks before it in the reply. Over a
multi-step agent loop, every signed block the guard sends must sit behind that
very prefix again, and every compaction block must arrive as it was returned.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from tests.engine._support import agent_history, call, lines, result
from tests.providers._support import anthropic_payload, anthropic_violations

Payload = dict[str, Any]
SIGNED = ("thinking", "redacted_thinking")


def _seal(payload: Payload, upto: int, before: list[Any]) -> str:
    """What a block is bound to: system, messages before it, blocks before it."""
    prefix = [payload.get("system"), payload["messages"][:upto], before]
    return hashlib.sha256(json.dumps(prefix, sort_keys=True).encode()).hexdigest()


def _as_read(payload: Payload) -> Payload:
    """``payload`` less the stale blocks of a running loop's final turn, which
    the API drops (``drop_block``): our reading is that a reply is bound to what
    its model saw."""
    messages = payload["messages"]
    final = _final_tool_turn(messages)
    if final == len(messages):
        return payload
    content = messages[final]["content"]
    kept = [
        b
        for t, b in enumerate(content)
        if b.get("type") not in SIGNED
        or (b.get("signature") or b.get("data")) == _seal(payload, final, content[:t])
    ]
    if len(kept) == len(content):
        return payload
    out = list(messages)
    out[final] = {**messages[final], "content": kept}
    return {**payload, "messages": out}


def _reply(k: int, payload: Payload, kinds: tuple[str, ...]) -> AIMessage:
    """The model's reply to ``payload`` as it read it: blocks of ``kinds``, then
    a tool call."""
    payload = _as_read(payload)
    upto = len(payload["messages"])
    blocks: list[dict[str, Any]] = []
    for kind in kinds:
        seal = _seal(payload, upto, blocks)
        if kind == "thinking":
            blocks.append(
                {"type": "thinking", "thinking": f"step {k}", "signature": seal}
            )
        elif kind == "redacted_thinking":
            blocks.append({"type": "redacted_thinking", "data": seal})
        else:
            blocks.append({"type": "compaction", "content": f"Summary {k}: {seal}"})
    if kinds == ("compaction",):  # returned alone
        return AIMessage(blocks, id=f"a{k}")
    blocks.append({"type": "text", "text": f"running {k}"})
    return AIMessage(blocks, tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")], id=f"a{k}")


def _final_tool_turn(messages: list[Payload]) -> int:
    """A running tool loop's final assistant message (``len`` if none)."""
    last = messages[-1] if messages else {}
    content = last.get("content")
    answers = isinstance(content, list) and any(
        b.get("type") == "tool_result" for b in content
    )
    return len(messages) - 2 if answers else len(messages)


def _check(payload: Payload, compactions: dict[str, dict[str, Any]]) -> bool:
    """Assert every signed block sits behind its own prefix.

    But in a running tool loop's final turn, which must start with its block on
    every Claude model: a stale one there is the provider's to drop
    (``drop_block``). Returns whether the last reply sent kept one.
    """
    kept = False
    final = _final_tool_turn(payload["messages"])
    for j, message in enumerate(payload["messages"]):
        content = message["content"]
        if not isinstance(content, list):
            continue
        for t, block in enumerate(content):
            if block.get("type") in SIGNED:
                seal = block.get("signature") or block.get("data")
                if seal != _seal(payload, j, content[:t]):
                    assert j == final, (j, t)  # a stale final turn's: drop_block's
            elif block.get("type") == "compaction":
                assert block == compactions[block["content"]]
        if message["role"] == "assistant":
            kept = any(b.get("type") in SIGNED for b in content)
    return kept


def _run(guard: ContextGuard, turns: list[tuple[tuple[str, ...], int]]) -> list[bool]:
    """An agent loop: each turn's reply kinds and result size.

    Returns, per call, whether the last reply sent kept a signed block.
    """
    history: list[BaseMessage] = agent_history(0)
    compactions: dict[str, dict[str, Any]] = {}
    kept = []
    for k, (kinds, size) in enumerate(turns):
        payload = anthropic_payload(guard.prepare(history).messages)
        assert anthropic_violations(payload) == []
        kept.append(_check(payload, compactions))
        reply = _reply(k, payload, kinds)
        history = [*history, reply]
        for block in reply.content:
            if isinstance(block, dict) and block["type"] == "compaction":
                compactions[block["content"]] = block
        if reply.tool_calls:
            body = lines(size, prefix=f"r{k}")
            history.append(result(f"c{k}", body, id=f"t{k}"))
        else:
            history.append(HumanMessage("Go on.", id=f"u{k}"))
    return kept


@pytest.mark.parametrize("stable", [True, False])
def test_each_kept_block_sits_behind_the_prompt_that_produced_it(stable):
    """Signed thinking on every reply, over prunings, compression and trims."""
    policy = GuardPolicy(
        context_window=16_000, stable_prefix=stable, bound_thinking=True
    )
    kinds = [("thinking",), ("thinking", "redacted_thinking"), ("redacted_thinking",)]
    turns = [(kinds[k % 3], 60 + 40 * (k % 4)) for k in range(60)]
    kept = _run(ContextGuard(policy), turns)
    # Behind a prompt re-sent unchanged, the newest reply keeps its block on most
    # calls (pruning afresh on every call too: it was 3 of 60 when held to the
    # history as read).
    assert sum(kept) >= 40


REPLIES = st.sampled_from(
    [
        (),
        ("thinking",),
        ("redacted_thinking",),
        ("thinking", "redacted_thinking"),
        ("redacted_thinking", "thinking"),
        ("compaction",),
    ]
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    st.lists(st.tuples(REPLIES, st.sampled_from([1, 40, 300, 900])), max_size=40),
    st.sampled_from([16_000, 24_000, 40_000]),
    st.booleans(),
    st.sampled_from([0, 1, 2]),
)
def test_fuzzed_replies_never_send_a_stale_block_or_an_altered_compaction(
    turns, window, stable, keep_thinking
):
    policy = GuardPolicy(
        context_window=window,
        stable_prefix=stable,
        keep_recent_thinking=keep_thinking,
        bound_thinking=True,
    )
    _run(ContextGuard(policy), turns)
