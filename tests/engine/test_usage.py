"""Usage by category: the split of a prompt's tokens, adding up to the count."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.tools import tool

from langchain_context_guard import (
    MARKER_KEY,
    CallableCounter,
    ContextGuard,
    ContextUsage,
    GuardPolicy,
)
from langchain_context_guard.engine import (
    REPLY_OVERHEAD,
    usage_by_category,
    usage_notice,
)

from ._support import IMAGE, THINKING, agent_history, ai, call, result, transcripts


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return path


def _guard(**policy: Any) -> ContextGuard:
    return ContextGuard(GuardPolicy(context_window=64_000, **policy))


def _every_kind() -> list[BaseMessage]:
    summary = HumanMessage(
        "Summary of the earlier turns: the bug is in f.py.",
        additional_kwargs={MARKER_KEY: {"kind": "summary"}},
    )
    return [
        SystemMessage("You are a coding agent."),
        summary,
        HumanMessage([{"type": "text", "text": "What is in this picture?"}, IMAGE]),
        AIMessage(
            [THINKING, {"type": "text", "text": "Let me read the file."}],
            tool_calls=[call("c1", "read_file", path="f.py")],
        ),
        result("c1", "def f():\n    return 1\n" * 40),
        AIMessage("It returns 1.", additional_kwargs={"reasoning_content": "easy"}),
        ChatMessage("a note from the app", role="system"),
    ]


def test_every_category_is_filled_and_they_add_up_to_the_count() -> None:
    guard = _guard()
    messages = _every_kind()
    usage = guard.context_usage(messages, tools=[read_file])
    assert all(usage.by_category().values()), usage
    assert usage.images == guard.policy.image_tokens
    assert usage.tools == guard.counter.count_tools([read_file])
    counted = guard.count_tokens(messages, tools=[read_file]) - REPLY_OVERHEAD
    assert usage.total == counted
    assert usage.window == 64_000
    assert usage.share == pytest.approx(counted / 64_000)
    assert usage.messages == len(messages)


def test_a_note_counts_whole_and_nothing_else_does() -> None:
    guard = _guard()
    digest = HumanMessage(
        "Earlier: read f.py, ran tests.",
        additional_kwargs={MARKER_KEY: {"kind": "digest"}},
    )
    truncated = result(
        "c1", "head ... tail", additional_kwargs={MARKER_KEY: {"kind": "truncated"}}
    )
    usage = guard.context_usage([digest, ai(call("c1")), truncated])
    assert usage.notes == guard.counter.count_message(digest)
    assert usage.tool_results == guard.counter.count_message(truncated)
    note = usage_notice(ContextUsage(user=60, window=100), (0.5,), last=None)
    assert note is not None and "over 50%" in str(note.content)
    assert guard.context_usage([note]).notes == guard.counter.count_message(note)
    assert usage_notice(ContextUsage(user=40, window=100), (0.5,), None) is None
    assert usage_notice(ContextUsage(user=60, window=100), (0.5,), ai()) is None


@settings(max_examples=40, deadline=None)
@given(transcripts())
def test_the_split_adds_up_for_any_transcript(history: list[BaseMessage]) -> None:
    guard = _guard()
    usage = guard.context_usage(history)
    assert usage.total == guard.count_tokens(history) - REPLY_OVERHEAD
    assert min(usage.by_category().values()) >= 0


def test_a_callable_counter_splits_its_own_counts() -> None:
    counter = CallableCounter(lambda ms: sum(len(str(m.content)) for m in ms) + 3)
    messages = _every_kind()
    usage = usage_by_category(messages, counter, tools_tokens=10, window=1_000)
    assert usage.total == 10 + sum(map(counter.count_message, messages))
    assert usage.tool_results > 0 and usage.images > 0


class _Watched(ContextGuard):
    asked = 0

    def context_usage(self, *args: Any, **kwargs: Any) -> ContextUsage:
        self.asked += 1
        return super().context_usage(*args, **kwargs)


def test_prepare_counts_usage_only_when_asked() -> None:
    guard = _Watched(GuardPolicy(context_window=32_000))
    history = agent_history(40, result_chars=3_000)
    prepared = guard.prepare(history, tools=[read_file])
    assert guard.asked == 0
    sent = prepared.usage()
    assert guard.asked == 1
    counted = guard.count_tokens(prepared.messages, tools=[read_file])
    assert sent.total == counted - REPLY_OVERHEAD
    assert sent.tools > 0
    whole = prepared.usage(history)
    assert whole.tool_results > sent.tool_results
    assert whole.messages == len(history)


def test_usage_reads_as_a_line_and_a_dict() -> None:
    usage = ContextUsage(system=10, user=30, tool_results=60, window=1_000)
    assert usage.total == 100 and usage.share == 0.1
    assert usage.describe() == (
        "100 tokens (10% of 1,000): system 10, user 30, tool results 60"
    )
    doc = usage.to_dict()
    assert doc["total"] == 100 and doc["share"] == 0.1 and doc["tool_results"] == 60
    assert ContextUsage().share == 0.0
