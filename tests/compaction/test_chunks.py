"""A range over the summarizer's budget is summarised in parts and merged."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from langchain_context_guard.compaction import Compactor
from langchain_context_guard.compaction._chunks import merge_groups, split_range
from langchain_context_guard.compaction._summary_prompt import serialize
from langchain_context_guard.engine._messages import is_summary
from tests.compaction._support import (
    SUMMARY_TEXT,
    ScriptedSummarizer,
    agent_history,
    make_guard,
    settings,
)

GUARD = make_guard(window=200_000, reserve=4_000)
BUDGET = 10_000  # the smallest max_prompt_chars
_CONVERSATION = re.compile(r"<conversation>\n(.*)\n</conversation>", re.S)


class PartSummarizer(ScriptedSummarizer):
    """Answers each part with its number, and a merge with every part it read."""

    profile: dict[str, Any] | None = None

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        text = str(messages[-1].content)
        if "Write the merged summary now" in text:
            parts = re.findall(r"part (\d+) done", text)
            merged = "\n".join(f"- part {n} done" for n in parts)
            return AIMessage(f"<completed>\n{merged}\n</completed>")
        n = len(self.received)
        return AIMessage(f"<completed>\n- part {n} done\n</completed>")


def _calls(summarizer: PartSummarizer) -> tuple[list[str], list[str]]:
    """The conversation text of each part's call, and the text of each merge."""
    parts, merges = [], []
    for prompt in summarizer.received:
        text = str(prompt[-1].content)
        found = _CONVERSATION.search(text)
        if found:
            parts.append(found.group(1))
        else:
            merges.append(text)
    return parts, merges


def _long_range() -> list[BaseMessage]:
    return agent_history(60, chars=3_000)


def test_no_message_of_a_long_range_is_lost_and_each_call_fits() -> None:
    history = _long_range()
    summarizer = PartSummarizer()
    comp = Compactor(
        summarizer,
        settings(max_prompt_chars=BUDGET, max_input_chars=1_000),
        guard=GUARD,
    )
    plan = comp.plan(history)
    assert plan is not None
    assert len(serialize(plan.history, 1_000)) > 3 * BUDGET  # several parts' worth
    result = comp.compact(history)
    parts, merges = _calls(summarizer)
    assert len(parts) > 3 and len(merges) == 1
    assert all(len(text) <= BUDGET for text in parts)
    # Every message of the range reaches exactly one part, in order, none cut
    # beyond its own max_input_chars (no part's middle is cut out).
    joined = "\n\n".join(parts)
    assert joined == serialize(plan.history, 1_000)
    # The merge reads every partial summary; the summary keeps them all.
    assert all(f"part {n} done" in merges[0] for n in range(1, len(parts) + 1))
    assert len(result.summary.completed) == len(parts)
    assert is_summary(result.messages[1])


async def test_async_parts_are_summarised_and_merged_too() -> None:
    summarizer = PartSummarizer()
    comp = Compactor(
        summarizer,
        settings(max_prompt_chars=BUDGET, max_input_chars=1_000),
        guard=GUARD,
    )
    plan = comp.plan(_long_range())
    assert plan is not None
    await comp.acompact(_long_range())
    parts, merges = _calls(summarizer)
    assert sorted(parts, key=len) and len(merges) == 1
    assert sorted(parts) == sorted(
        "\n\n".join(serialize([m], 1_000) for m in chunk)
        for chunk in split_range(plan.history, max_chars=1_000, budget=BUDGET)
    )


def test_a_range_that_fits_is_one_call_as_before() -> None:
    summarizer = ScriptedSummarizer(responses=[SUMMARY_TEXT])
    comp = Compactor(summarizer, settings(), guard=GUARD)
    comp.compact(agent_history(12))
    assert len(summarizer.received) == 1


def test_the_summarizer_profile_window_sizes_the_parts() -> None:
    window = 6_000  # tokens: 40% of it holds far fewer characters than the default
    summarizer = PartSummarizer(profile={"max_input_tokens": window})
    comp = Compactor(summarizer, settings(max_input_chars=1_000), guard=GUARD)
    comp.compact(_long_range())
    parts, merges = _calls(summarizer)
    assert len(parts) > 1 and len(merges) == 1
    count = GUARD.counter.count_message
    for prompt in summarizer.received:  # parts sized to 40% of it, plus the prompt
        assert sum(count(m) for m in prompt) <= window // 2


@pytest.mark.parametrize(
    ("sizes", "budget", "expected"),
    [
        pytest.param([10, 10, 10], 100, [[0, 1, 2]], id="all-fit"),
        pytest.param([60, 60, 60], 100, [[0], [1], [2]], id="one-each"),
        pytest.param([40, 40, 40, 40], 100, [[0, 1], [2, 3]], id="pairs"),
        pytest.param([150, 10], 100, [[0], [1]], id="one-over"),
    ],
)
def test_merge_groups_are_consecutive_and_fit(
    sizes: list[int], budget: int, expected: list[list[int]]
) -> None:
    assert merge_groups(["x" * n for n in sizes], budget) == expected


def test_many_partial_summaries_are_merged_in_rounds_that_fit() -> None:
    class Wordy(PartSummarizer):
        def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
            answer = super().reply(messages, **kwargs)
            pad = "\n".join(f"- detail {i} " + "x" * 60 for i in range(30))
            return AIMessage(f"{answer.text}\n<notes>\n{pad}\n</notes>")

    summarizer = Wordy()
    comp = Compactor(
        summarizer,
        settings(max_prompt_chars=BUDGET, max_input_chars=1_000),
        guard=GUARD,
    )
    result = comp.compact(agent_history(120, chars=3_000))
    parts, merges = _calls(summarizer)
    assert len(merges) > 1  # partial summaries over the budget: merged in rounds
    final = merges[-1]
    assert all(f"part {n} done" in final for n in range(1, len(parts) + 1))
    assert len(result.summary.completed) == len(parts)
