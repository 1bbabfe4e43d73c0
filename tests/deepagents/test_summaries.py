"""deepagents' own summary call: over the window by default, within it guarded.

deepagents summarises once its count (characters / 4) passes 0.85 of the window
and sends the whole older history to the model, guard or not.
``guarded_summarization`` counts with the guard and fits what it summarises,
keeping the task and the newest results (LangChain's own trimming kept nothing
of an agent's tool loop: "Previous conversation was too long to summarize.").
"""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from langchain_context_guard import (
    ConfigError,
    ContextGuard,
    ContextGuardMiddleware,
    GuardPolicy,
    guarded_subagents,
    guarded_summarization,
)

from ._support import NEEDS_HOOK, REVIEW, TASK, DeepScript, judge, module, run

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


@NEEDS_HOOK
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


@NEEDS_HOOK
@WINDOWS
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_guarded_summaries_are_asked_with_the_task_and_newest_results(
    window: int, asynchronous: bool
) -> None:
    result = run(window, _guarded, asynchronous=asynchronous)
    asked = [r.messages[-1].text for r in result.of("summary")]
    assert asked
    assert all(TASK in text or REVIEW in text for text in asked)
    assert result.lost() == {}


@NEEDS_HOOK
def test_a_window_too_small_for_the_summary_prompt_is_refused() -> None:
    from langchain_context_guard import ConfigError

    model = DeepScript(profile={"max_input_tokens": 800})
    policy = GuardPolicy(context_window=800, reserve_tokens=200, hard_min_tokens=500)
    guard = ContextGuard(policy)
    with pytest.raises(ConfigError, match="summary prompt"):
        guarded_summarization(model, guard=guard)


@NEEDS_HOOK
def test_it_takes_deepagents_summarization_slot_and_counts_as_the_guard() -> None:
    model = DeepScript(profile={"max_input_tokens": 16_000})
    middleware = guarded_summarization(model)
    assert middleware.name == "SummarizationMiddleware"
    messages = [HumanMessage(module(3))]
    assert middleware.token_counter(messages) == judge(16_000).count_tokens(messages)


def test_a_deepagents_without_the_summarizer_hook_gets_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from deepagents.middleware import summarization

    def older(model: object, backend: object, *, token_counter: object = None) -> None:
        raise AssertionError("not to be called")

    monkeypatch.setattr(summarization, "create_summarization_middleware", older)
    with pytest.raises(ConfigError, match=r"deepagents>=0\.7\.26"):
        guarded_summarization(DeepScript(profile={"max_input_tokens": 16_000}))
