"""A rewritten state inside a deep agent, beside deepagents' summarization.

deepagents leaves the messages in the state and records where its summary cuts
them (``_summarization_event``); ``CompactionMiddleware`` and
``ContextGuardMiddleware(persist=True)`` rewrite the state. Once both have cut,
every later request must still hold the task and the result of the call just
made, not deepagents' old summary alone.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.messages import BaseMessage

from langchain_context_guard import (
    CompactionMiddleware,
    ContextGuardMiddleware,
    guarded_subagents,
    guarded_summarization,
)
from langchain_context_guard.engine import is_summary
from tests.compaction._support import ScriptedSummarizer

from ._support import NEEDS_HOOK, DeepScript, Run, SectionWriter, run

pytest.importorskip("deepagents")
WINDOWS = pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])


def _with_compaction(
    window: int,
    summarizer: ScriptedSummarizer,
    *,
    asynchronous: bool = False,
    **settings: object,
) -> Run:
    def build(model: DeepScript) -> dict[str, object]:
        compaction = CompactionMiddleware(model, summarizer=summarizer, **settings)
        return {"middleware": [compaction]}

    return run(window, build, asynchronous=asynchronous)


def _deepagents_summary(message: BaseMessage) -> bool:
    return message.additional_kwargs.get("lc_source") == "summarization"


def _holding(result: Run, kind: Callable[[BaseMessage], bool]) -> list[int]:
    """The main requests holding a summary of ``kind``."""
    return [
        n
        for n, request in enumerate(result.of("main"))
        if any(kind(m) for m in request.messages)
    ]


@WINDOWS
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_after_both_summaries_every_request_holds_task_and_results(
    window: int, asynchronous: bool
) -> None:
    summarizer = ScriptedSummarizer()
    # deepagents cuts at 0.85 of the window, before this trigger: both summarise.
    result = _with_compaction(
        window, summarizer, asynchronous=asynchronous, trigger=("messages", 60)
    )
    assert _holding(result, _deepagents_summary)
    assert summarizer.received
    assert result.lost() == {}
    assert result.state["messages"][-1].text == "All modules fixed."


@WINDOWS
def test_with_the_default_trigger_nothing_is_lost(window: int) -> None:
    result = _with_compaction(window, ScriptedSummarizer())
    assert _holding(result, is_summary)
    assert result.lost() == {}
    assert result.state["messages"][-1].text == "All modules fixed."


@WINDOWS
def test_a_persisting_guard_loses_nothing(window: int) -> None:
    result = run(window, middleware=[ContextGuardMiddleware(persist=True)])
    assert _holding(result, _deepagents_summary)
    assert result.lost() == {}
    assert result.over_budget("main") == 0


def _documented(model: DeepScript) -> dict[str, object]:
    summarize = guarded_summarization(model)
    compaction = CompactionMiddleware(
        model, summarizer=SectionWriter.into(model.requests)
    )
    return {
        "middleware": [compaction, ContextGuardMiddleware(), summarize],
        "subagents": guarded_subagents(middleware=[summarize]),
    }


@NEEDS_HOOK
@WINDOWS
def test_as_the_docs_say_both_summarise_in_turn_within_budget(window: int) -> None:
    result = run(window, _documented)
    deepagents = _holding(result, _deepagents_summary)
    ours = _holding(result, is_summary)
    assert ours
    assert any(n > min(ours) for n in deepagents), "deepagents after ours"
    assert result.lost() == {}
    over = {who: result.over_budget(who) for who in ("main", "sub", "summary")}
    assert over == {"main": 0, "sub": 0, "summary": 0}
    assert result.of("compaction")
    assert result.over_budget("compaction") == 0
