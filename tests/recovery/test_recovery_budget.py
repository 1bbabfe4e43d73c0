"""The recovery chain counts the budget the middleware counts.

The window and the reply reserve come from one place (``ContextGuard.budget``):
the model's profile window, its ``max_tokens`` as the reserve when the policy
leaves ``reserve_tokens`` unset, and the limit learned under the bare model name
whether the model is named ``provider:model`` or passed as an object.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.recovery._middleware import OverflowRecoveryMiddleware
from langchain_context_guard.recovery._runnable import (
    overflow_info,
    recover_overflow,
    with_overflow_recovery,
)
from tests.recovery._support import (
    OVERFLOW_ERRORS,
    LimitedChatModel,
    history,
    limited_model,
)

MAX_TOKENS = 10_000
"""The reply reserve the chat models below set (``max_tokens``)."""


class MaxTokensModel(LimitedChatModel):
    """A limited model that, like ChatAnthropic, sets ``max_tokens``."""

    max_tokens: int = MAX_TOKENS


def unset_reserve_policy(**overrides: Any) -> GuardPolicy:
    """Small windows allowed, ``reserve_tokens`` left unset (so max_tokens counts)."""
    settings: dict[str, Any] = {
        "hard_min_tokens": 1_000,
        "warn_below_tokens": 1_000,
        **overrides,
    }
    return GuardPolicy(**settings)


def max_tokens_model(limit: int, **kwargs: Any) -> MaxTokensModel:
    base = limited_model(limit, **kwargs)
    return MaxTokensModel(**{**dict(base), "messages": base.messages})


def test_truncation_keeps_the_models_max_tokens_free() -> None:
    msgs = history()
    model = max_tokens_model(15_000)
    guard = ContextGuard(unset_reserve_policy(context_window=60_000))
    tokens = guard.count_tokens(msgs)
    info = overflow_info(OVERFLOW_ERRORS["anthropic"](tokens, 15_000))
    assert info is not None
    done = recover_overflow(msgs, info, guard, model=model)
    # What the middleware counts for this model at the learned limit.
    budget = guard.budget(model)
    assert guard.window(model).tokens == 15_000
    assert budget == 15_000 - MAX_TOKENS
    assert guard.count_tokens(done.messages) <= budget
    assert done.events[-1].budget == budget


def test_compaction_is_fitted_to_the_same_budget() -> None:
    msgs = history()
    model = max_tokens_model(15_000)
    guard = ContextGuard(unset_reserve_policy(context_window=60_000))
    tokens = guard.count_tokens(msgs)
    info = overflow_info(OVERFLOW_ERRORS["openai"](tokens, 15_000))
    assert info is not None
    done = recover_overflow(
        msgs, info, guard, model=model, compactor=lambda m: m[:-5] + m[-1:]
    )
    assert done.step == "compact"
    assert guard.count_tokens(done.messages) <= 15_000 - MAX_TOKENS


def test_a_limit_learned_from_an_object_applies_to_its_provider_string() -> None:
    msgs = history()
    model = limited_model(15_000, model_name="Claude-Test")
    guard = ContextGuard(
        unset_reserve_policy(reserve_tokens=1_000), model="anthropic:claude-test"
    )
    with_overflow_recovery(model, guard).invoke(msgs)
    for name in ("anthropic:claude-test", "claude-test", None):
        window = guard.window(name)
        assert (window.tokens, window.source) == (15_000, "learned")
    # And the other way round: learned under the string, read for the object.
    other = ContextGuard(unset_reserve_policy(reserve_tokens=1_000))
    other.learn_limit("anthropic:claude-test", 20_000)
    assert other.window(model).tokens == 20_000


def test_agent_retry_fits_what_the_middleware_would_send() -> None:
    """Both middlewares, one guard built from flat settings, a max_tokens model."""
    model = max_tokens_model(
        15_000, replies=["done"], model_name="anthropic:fake-limited"
    )
    guard_mw = ContextGuardMiddleware(
        hard_min_tokens=1_000, warn_below_tokens=1_000, context_window=60_000
    )
    recovery = OverflowRecoveryMiddleware(guard_mw.guard)
    agent = create_agent(model, [], middleware=[guard_mw, recovery])
    msgs: list[BaseMessage] = [*history()[1:-1], HumanMessage("What next?")]
    state = agent.invoke({"messages": msgs})
    assert state["messages"][-1].content == "done"
    assert len(model.calls) == 2
    assert model.calls[0] > 15_000
    assert model.calls[1] <= 15_000 - MAX_TOKENS
    assert guard_mw.guard.budget(model) == 15_000 - MAX_TOKENS


def test_a_limit_learned_in_recovery_reaches_a_middleware_given_a_model_string() -> (
    None
):
    model = limited_model(15_000, replies=["done", "again"], model_name="fake-limited")
    guard_mw = ContextGuardMiddleware(
        model="anthropic:fake-limited",
        context_window=60_000,
        reserve_tokens=1_000,
        hard_min_tokens=1_000,
        warn_below_tokens=1_000,
    )
    recovery = OverflowRecoveryMiddleware(guard_mw.guard)
    agent = create_agent(model, [], middleware=[guard_mw, recovery])
    msgs: list[BaseMessage] = [*history()[1:-1], HumanMessage("What next?")]
    state = agent.invoke({"messages": msgs})
    assert len(model.calls) == 2  # refused, then retried
    state = agent.invoke({"messages": [*state["messages"], HumanMessage("And?")]})
    assert state["messages"][-1].content == "again"
    assert len(model.calls) == 3  # the middleware pruned under the learned limit
    assert model.calls[2] <= 15_000


def test_recovery_given_the_middlewares_model_counts_its_budget() -> None:
    """``ContextGuardMiddleware(model=...)`` and recovery with the same model."""
    model = max_tokens_model(15_000, replies=["done"], model_name="fake-limited")
    name = "anthropic:fake-limited"
    settings: dict[str, Any] = {"hard_min_tokens": 1_000, "warn_below_tokens": 1_000}
    guard_mw = ContextGuardMiddleware(model=name, context_window=60_000, **settings)
    events: list[Any] = []
    recovery = OverflowRecoveryMiddleware(
        guard_mw.guard, model=name, on_event=events.append
    )
    agent = create_agent(model, [], middleware=[guard_mw, recovery])
    msgs: list[BaseMessage] = [*history()[1:-1], HumanMessage("What next?")]
    agent.invoke({"messages": msgs})
    # A name has no max_tokens: the policy's reserve, as the middleware counts.
    budget = guard_mw.guard.budget(name)
    # A learned window keeps at least half of itself to send.
    assert budget == 15_000 - min(GuardPolicy().reserve(15_000), 15_000 // 2)
    assert events[-1].budget == budget
    assert len(model.calls) == 2 and model.calls[1] <= budget
