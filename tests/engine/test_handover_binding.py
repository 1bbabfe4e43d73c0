"""Handover records and signed reasoning: a prompt is trusted only if rebuilt.

A worker that takes a thread over rebuilds the previous worker's prompt from its
records. When its own settings differ, or the history was rewritten since the
record (compaction put a summary in place of old turns), it would rebuild a
prompt the model never saw and trust signed blocks behind it: it must not.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine._messages import final_tool_turn
from langchain_context_guard.engine.passes._bound_thinking import is_signed
from tests.engine._support import agent_history, call, result, snapshot

POLICY = GuardPolicy(
    context_window=16_000, bound_thinking=True, max_tool_result_chars=6_000
)
OTHER = POLICY.model_copy(update={"max_tool_result_chars": 5_000})


def _signature(prompt: list[BaseMessage]) -> str:
    return hashlib.sha256(snapshot(prompt).encode()).hexdigest()


def _run(guard: ContextGuard, steps: int) -> tuple[list[BaseMessage], dict[int, Any]]:
    """An agent whose model signs each reply with its prompt; its records."""
    history: list[BaseMessage] = agent_history(0)
    records: dict[int, Any] = {}
    for k in range(steps):
        prompt = guard.prepare(history).messages
        records[len(history)] = guard.export_state(history)
        thinking = {"type": "thinking", "thinking": f"t{k}"}
        thinking["signature"] = _signature(prompt)
        reply = AIMessage(
            [thinking, {"type": "text", "text": f"step {k}"}],
            tool_calls=[call(f"c{k}", cmd=f"cat f{k}.py")],
            id=f"a{k}",
        )
        body = "\n".join(f"{k}-{i} " + "x" * 60 for i in range(60))
        history = [*history, reply, result(f"c{k}", body, id=f"t{k}")]
        if k % 5 == 4:
            history.append(HumanMessage(f"Next part {k}.", id=f"u{k}"))
    return history, records


def _stale_before_final(prompt: list[BaseMessage]) -> int:
    final = final_tool_turn(prompt)
    stale = 0
    for i, m in enumerate(prompt[:final]):
        if isinstance(m, AIMessage) and isinstance(m.content, list):
            for block in m.content:
                if is_signed(block):
                    stale += block["signature"] != _signature(prompt[:i])
    return stale


def test_a_worker_with_the_same_settings_rebuilds_and_keeps_valid_blocks():
    first = ContextGuard(POLICY)
    history, records = _run(first, 30)
    other = ContextGuard(POLICY)
    other.restore_state(history, records)
    prompt = other.prepare(history).messages
    assert prompt == first.prepare(history).messages
    assert any(  # some blocks are kept: the rebuilt prompt is the one sent
        isinstance(m, AIMessage) and any(map(is_signed, m.content))
        for m in prompt[: final_tool_turn(prompt)]
    )


def test_a_worker_with_other_settings_trusts_no_block_it_cannot_rebuild():
    history, records = _run(ContextGuard(POLICY), 30)
    other = ContextGuard(OTHER)
    other.restore_state(history, records)
    prompt = other.prepare(history).messages
    assert _stale_before_final(prompt) == 0
    final = final_tool_turn(prompt)
    assert not any(
        isinstance(m, AIMessage) and any(map(is_signed, m.content))
        for m in prompt[:final]
    )


def test_records_of_a_rewritten_history_are_not_rebuilt():
    """Old turns replaced by a summary: the records' bases point elsewhere."""
    history, records = _run(ContextGuard(POLICY), 30)
    summary = HumanMessage("Summary of the earlier work.", id="summary")
    cut = 12
    rewritten = [history[0], summary, *history[cut:]]
    kept = {at - cut + 2: r for at, r in records.items() if at > cut}
    other = ContextGuard(POLICY)
    other.restore_state(rewritten, kept)
    prompt = other.prepare(rewritten).messages
    assert _stale_before_final(prompt) == 0
