"""Provider compaction blocks: opaque, and the history starts at the latest one."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.engine.passes._provider_compaction import (
    drop_before_compaction,
    holds_compaction,
)
from tests.engine._support import (
    ANTHROPIC_COMPACTION,
    OPENAI_COMPACTION,
    agent_history,
    transcripts,
)
from tests.engine.test_reference import COUNTER, POLICIES, SETTINGS, assert_reference


def _compacted(history: list[BaseMessage], at: int, block: Any) -> list[BaseMessage]:
    summary = AIMessage([block], id="compacted")
    return [*history[:at], summary, *history[at:]]


def test_the_history_is_sent_from_the_latest_compaction_block():
    history = agent_history(6)
    first = _compacted(history, 4, ANTHROPIC_COMPACTION)
    both = _compacted(first, 10, OPENAI_COMPACTION)
    out = drop_before_compaction(both)
    assert out[0] is both[0]  # the system message stays
    assert out[1:] == both[10:]
    assert drop_before_compaction(history) is history


def test_a_huge_compaction_block_is_never_edited():
    block = {"type": "compaction", "content": "summary line\n" * 2_000}
    head = agent_history(2)
    history = [*head, AIMessage([block], id="compacted"), *agent_history(3)[2:]]
    policy = GuardPolicy(context_window=20_000, max_chars_per_message=3_000)
    sent = ContextGuard(policy, token_counter=COUNTER).prepare(history).messages
    kept = [m for m in sent if holds_compaction(m)]
    assert kept and kept[0].content == [block]
    assert sent[0] == history[0] and isinstance(sent[0], SystemMessage)
    assert not {id(m) for m in head[1:]} & {id(m) for m in sent}  # not sent


def _latest(history: list[BaseMessage]) -> int:
    return max((i for i, m in enumerate(history) if holds_compaction(m)), default=0)


def _compaction_blocks(messages: list[BaseMessage]) -> list[Any]:
    return [
        b
        for m in messages
        if isinstance(m, AIMessage) and isinstance(m.content, list)
        for b in m.content
        if isinstance(b, dict) and b.get("type") == "compaction"
    ]


@SETTINGS
@given(transcripts(usage=True, native=True), POLICIES, st.data())
def test_no_compaction_block_is_altered_and_nothing_before_the_latest_is_sent(
    history, policy, data
):
    start = data.draw(st.integers(1, len(history)))
    ends = sorted({start, *data.draw(st.lists(st.integers(start, len(history))))})
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in ends:
        lived = history[:n]
        assert_reference(guard, lived)
        try:
            sent = guard.prepare(lived).messages
        except Exception:  # over budget: checked equal to the reference above
            continue
        at = _latest(lived)
        before = {id(m) for m in lived[:at] if not isinstance(m, SystemMessage)}
        latest = _compaction_blocks(lived[at : at + 1])
        sent_blocks = _compaction_blocks(sent)
        assert sent_blocks == latest  # unchanged, never trimmed
        assert not before & {id(m) for m in sent}


def test_a_compaction_block_arriving_ends_the_re_sent_prompt():
    guard = ContextGuard(GuardPolicy(context_window=16_000), token_counter=COUNTER)
    history = agent_history(30)
    for n in range(2, 40):
        guard.prepare(history[:n])
    compacted = _compacted(history[:40], 40, ANTHROPIC_COMPACTION)
    compacted += agent_history(3)[2:]
    sent = guard.prepare(compacted).messages
    assert _compaction_blocks(sent) == [ANTHROPIC_COMPACTION]
    assert sent[0] is compacted[0]
    assert not {id(m) for m in compacted[1:40]} & {id(m) for m in sent}


def test_a_compaction_block_counts_as_its_summary():
    summary = AIMessage([ANTHROPIC_COMPACTION])
    same_text = AIMessage(ANTHROPIC_COMPACTION["content"])
    assert COUNTER.count_message(summary) == COUNTER.count_message(same_text)
    opaque = AIMessage([OPENAI_COMPACTION])
    assert (
        COUNTER.count_message(opaque)
        >= len(OPENAI_COMPACTION["encrypted_content"]) // 4
    )


def test_the_trim_keeps_the_compaction_block_as_it_keeps_a_summary():
    block = {"type": "compaction", "content": "summary line\n" * 400}
    head = agent_history(2)
    history = [*head, AIMessage([block], id="compacted"), *agent_history(150)[2:]]
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000)
    result = ContextGuard(policy, token_counter=COUNTER).prepare(history)
    sent = result.messages
    assert "trim" in {e.kind for e in result.report.events}
    assert _compaction_blocks(sent) == [block]


@SETTINGS
@given(transcripts(native=True), POLICIES)
def test_native_histories_rebuilt_from_a_checkpoint_give_the_reference(history, policy):
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in (len(history) // 2, len(history)):
        assert_reference(guard, copy.deepcopy(history[:n]))  # equal, new objects
