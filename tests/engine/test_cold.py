"""A cold ``prepare``: the history and a first run's rewrites counted in one batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_guard import ContextGuard, GuardPolicy, TiktokenCounter
from langchain_context_guard.engine._messages import marker
from langchain_context_guard.engine.incremental._first_run import (
    CallCounts,
    first_rewrites,
)
from tests.engine._support import agent_history, ai, call, lines, result, snapshot

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)


class OneByOne:
    """The tiktoken counter without ``prime``: every message counted alone."""

    def __init__(self) -> None:
        self._counter = TiktokenCounter()
        self.name = self._counter.name

    def count_message(self, message: BaseMessage) -> int:
        return self._counter.count_message(message)

    def count_tools(self, tools: Sequence[Any]) -> int:
        return self._counter.count_tools(tools)


def written_out(steps: int) -> list[BaseMessage]:
    """An agent that writes each command in its text too, some at length."""
    history = agent_history(0)
    for k in range(steps):
        command = f"cat f{k}.py"
        text = f"Next I look at f{k}.\n\n```bash\n{command}\n```"
        if k % 5 == 0:
            text = lines(60, prefix=f"thought{k}") + text
        history.append(ai(call(f"c{k}", cmd=command), content=text, id=f"a{k}"))
        history.append(result(f"c{k}", lines(40, prefix=f"r{k}"), id=f"t{k}"))
    return history


def test_a_cold_prepare_gives_what_one_by_one_counts_give() -> None:
    history = written_out(400)
    batched = ContextGuard(POLICY).prepare(history)
    alone = ContextGuard(POLICY, token_counter=OneByOne()).prepare(history)
    assert snapshot(batched.messages) == snapshot(alone.messages)
    assert batched.report == alone.report
    assert {e.kind for e in batched.report.events} >= {"truncate", "compress", "trim"}


def test_the_rewrites_a_first_run_counts_are_counted_with_the_history() -> None:
    history = written_out(60)
    guard = ContextGuard(POLICY)
    guard.prepare(history)
    counter = guard.counter
    assert isinstance(counter, TiktokenCounter)
    rewrites = first_rewrites(history, POLICY, 32_000, counter.count_message)
    kinds = {(m.type, (marker(m) or {}).get("kind")) for m in rewrites}
    assert kinds == {
        ("ai", "deduplicated"),
        ("ai", "compressed"),
        ("tool", "compressed"),
    }
    encoded = counter.encoded
    for message in rewrites:
        counter.count_message(message)
    assert counter.encoded == encoded  # all of them were in the batch


def test_a_rewrite_sharing_its_originals_tool_calls_counts_them_alike() -> None:
    history = written_out(30)
    expected = [TiktokenCounter().count_message(m) for m in history]
    copies = [
        m.model_copy(update={"content": f"{m.content} again"})
        for m in history
        if isinstance(m, AIMessage)
    ]
    counter = TiktokenCounter()
    counter.prime([*history, *copies])
    assert [counter.count_message(m) for m in history] == expected
    alone = TiktokenCounter()
    assert [counter.count_message(m) for m in copies] == [
        alone.count_message(m) for m in copies
    ]


def test_call_counts_keep_a_calls_counts_by_identity_until_closed() -> None:
    seen: list[BaseMessage] = []

    def count(message: BaseMessage) -> int:
        seen.append(message)
        return len(str(message.content))

    history = agent_history(3)
    counts = CallCounts(count, ([history[0]], [7]))
    assert counts(history[0]) == 7  # primed: not counted again
    equal = history[1].model_copy()
    assert [counts(history[1]), counts(history[1]), counts(equal)] == [
        len(str(history[1].content))
    ] * 3
    assert seen == [history[1], equal]  # an equal copy is another message
    counts.close()
    counts(history[0])
    assert seen[-1] is history[0]
