"""A provider's stated limit is trusted, converted and kept per model.

The guard's window is set too high (64k) for a provider that allows 16k, as with
a local OpenAI-compatible server; the default ``hard_min_tokens`` (16,000) stays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_guard import (
    ContextGuard,
    ContextGuardMiddleware,
    GuardEvent,
    GuardPolicy,
    OverflowRecoveryMiddleware,
    with_overflow_recovery,
)
from langchain_context_guard.recovery import overflow_info, recover_overflow
from tests.recovery._support import (
    OVERFLOW_ERRORS,
    LimitedChatModel,
    history,
    small_policy,
)

SERVED = 16_000
"""What the provider allows; the guard is told 64k."""


def provider_model(
    limit: int = SERVED, *, provider: str = "openai", ratio: float = 1.01
) -> LimitedChatModel:
    """A model whose tokenizer counts ``ratio`` tokens for each of ours."""
    reference = ContextGuard(small_policy())

    def count(messages: list[BaseMessage], tools: Sequence[Any] | None) -> int:
        return math.ceil(ratio * reference.count_tokens(messages, tools=tools))

    return LimitedChatModel(
        messages=iter(["done", "again", "fresh"]),
        limit=limit,
        count=count,
        overflow=OVERFLOW_ERRORS[provider],
    )


@pytest.mark.parametrize("provider", ["openai", "anthropic", "llama.cpp"])
def test_recovery_trusts_a_stated_limit_below_the_hard_minimum(provider: str) -> None:
    guard = ContextGuard(GuardPolicy(context_window=64_000))
    model = provider_model(provider=provider)
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(model, guard, on_event=events.append)
    assert wrapped.invoke(history(7)).content == "done"
    assert [e.kind for e in events] == ["overflow", "overflow_recovery"]
    assert model.calls[0] > SERVED >= model.calls[1]
    window = guard.window(model)
    assert window.source == "learned"
    assert window.tokens < guard.policy.hard_min_tokens  # in our units, trusted
    # The guard stays usable: the same long history, then a new conversation.
    assert wrapped.invoke(history(7)).content == "again"
    assert wrapped.invoke([HumanMessage("hi")]).content == "fresh"
    assert max(model.calls[2:]) <= SERVED


def test_an_agent_recovers_against_a_16k_server_and_keeps_working() -> None:
    guard_mw = ContextGuardMiddleware(context_window=64_000)
    model = provider_model()
    agent = create_agent(
        model,
        [],
        middleware=[guard_mw, OverflowRecoveryMiddleware(guard_mw.guard)],
    )
    state = agent.invoke({"messages": history(7)})
    assert state["messages"][-1].content == "done"
    state = agent.invoke({"messages": [HumanMessage("A new question.")]})
    assert state["messages"][-1].content == "again"
    assert model.calls[0] > SERVED
    assert max(model.calls[1:]) <= SERVED


def test_a_learned_window_keeps_half_of_itself_from_a_large_reserve() -> None:
    guard = ContextGuard(GuardPolicy(context_window=64_000, reserve_tokens=12_000))
    model = provider_model(8_192, provider="llama.cpp", ratio=1.0)
    wrapped = with_overflow_recovery(model, guard)
    assert wrapped.invoke(history(7)).content == "done"
    assert guard.window(model).tokens == 8_192
    assert guard.budget(model) == 4_096
    assert wrapped.invoke([HumanMessage("hi")]).content == "again"


# --- implausible limits --------------------------------------------------------


def _info(provider: str, requested: int, limit: int) -> Any:
    info = overflow_info(OVERFLOW_ERRORS[provider](requested, limit))
    assert info is not None
    return info


@pytest.mark.parametrize(
    ("window", "stated"),
    [(64_000, 100), (None, 1_000), (128_000, 15_000)],
    ids=["absurd", "below-the-floor", "under-an-eighth-of-context-window"],
)
def test_an_implausible_limit_is_ignored_with_an_event(
    window: int | None, stated: int
) -> None:
    guard = ContextGuard(
        GuardPolicy(context_window=window, reserve_tokens=1_000, model="m")
    )
    msgs = history(7)
    tokens = guard.count_tokens(msgs)
    events: list[GuardEvent] = []
    done = recover_overflow(
        msgs, _info("openai", tokens, stated), guard, on_event=events.append
    )
    kinds = [e.kind for e in events]
    assert kinds == ["overflow", "limit_ignored", "overflow_recovery"]
    assert f"{stated:,}" in events[1].detail
    assert guard.limits.get("m") is None
    assert guard.window().source != "learned"
    # Without a believable figure the retry aims at 3/4 of what was refused.
    assert guard.count_tokens(done.messages) <= 0.75 * tokens
    assert guard.prepare([HumanMessage("hi")]).messages


def test_a_limit_under_an_eighth_is_learned_when_no_window_was_set() -> None:
    guard = ContextGuard(GuardPolicy(model="llama-3-8b"))  # the table says 128k
    msgs = history(7)
    recover_overflow(msgs, _info("openai", guard.count_tokens(msgs), 8_192), guard)
    assert guard.window().tokens == 8_192


def test_limits_are_kept_per_model_on_a_shared_guard() -> None:
    guard = ContextGuard(GuardPolicy(context_window=64_000, model="shared-name"))
    small, large = provider_model(), provider_model(60_000)
    small.model_name, large.model_name = "small-local", "large-hosted"
    with_overflow_recovery(small, guard).invoke(history(7))
    assert guard.window(small).source == "learned"
    assert guard.window(large).tokens == 64_000
    assert guard.window().tokens == 64_000  # the policy's own name learned nothing
