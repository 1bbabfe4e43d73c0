"""deepagents' own summary call: over the window by default, within it guarded.

deepagents summarises once its count (characters / 4) passes 0.85 of the window
and sends the whole older history to the model, guard or not.
``guarded_summarization`` counts with the guard and trims what it summarises.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    GuardPolicy,
    guarded_subagents,
    guarded_summarization,
)

from ._support import DeepScript, judge, module, run

pytest.importorskip("deepagents")
WINDOWS = pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])


def _guarded(model: DeepScript) -> dict[str, object]:
    summarize = guarded_summarization(model)
    return {
        "middleware": [ContextGuardMiddleware(), summarize],
        "subagents": guarded_subagents(middleware=[summarize]),
    }


@WINDOWS
def test_deepagents_summary_call_goes_over_budget(window: int) -> None:
    result = run(window, middleware=[ContextGuardMiddleware()])
    assert result.of("summary")
    assert result.over_budget("summary") > 0


@WINDOWS
def test_guarded_summarization_keeps_every_request_within_budget(window: int) -> None:
    result = run(window, _guarded)
    assert result.of("summary")
    assert {who: result.over_budget(who) for who in ("main", "sub", "summary")} == {
        "main": 0,
        "sub": 0,
        "summary": 0,
    }
    assert result.state["messages"][-1].text == "All modules fixed."


def test_a_window_too_small_for_the_summary_prompt_is_refused() -> None:
    from langchain_context_guard import ConfigError

    model = DeepScript(profile={"max_input_tokens": 800})
    policy = GuardPolicy(context_window=800, reserve_tokens=200, hard_min_tokens=500)
    guard = ContextGuard(policy)
    with pytest.raises(ConfigError, match="summary prompt"):
        guarded_summarization(model, guard=guard)


def test_it_takes_deepagents_summarization_slot_and_counts_as_the_guard() -> None:
    model = DeepScript(profile={"max_input_tokens": 16_000})
    middleware = guarded_summarization(model)
    assert middleware.name == "SummarizationMiddleware"
    messages = [HumanMessage(module(3))]
    assert middleware.token_counter(messages) == judge(16_000).count_tokens(messages)
