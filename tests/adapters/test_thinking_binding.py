"""``provider_drops_stale_thinking``: the beta option reaches Anthropic's request."""

from __future__ import annotations

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage

from langchain_context_guard import ContextGuardMiddleware
from langchain_context_guard.adapters._thinking_binding import (
    BINDING_BETA,
    DROP_BLOCK,
)
from tests.adapters._support import sent_models

THINKING = {"type": "enabled", "budget_tokens": 2_000}


def test_an_anthropic_model_thinking_asks_for_drop_block():
    model = ChatAnthropic(
        model="claude-sonnet-4-5", api_key="x", thinking=THINKING, max_tokens=4_000
    )  # type: ignore[call-arg]
    middleware = ContextGuardMiddleware(
        context_window=16_000, provider_drops_stale_thinking=True
    )
    first, second = sent_models(middleware, model)
    assert first is second  # one copy, while the agent's model is the same
    payload = first._get_request_payload([HumanMessage("Fix the bug.")])
    assert payload["thinking"] == {**THINKING, "block_binding": DROP_BLOCK}
    assert BINDING_BETA in payload["betas"]
    assert model.thinking == THINKING and not model.betas  # the agent's is unchanged


def test_without_the_option_or_without_thinking_the_model_is_sent_as_it_is():
    thinking = ChatAnthropic(model="claude-sonnet-4-5", api_key="x", thinking=THINKING)  # type: ignore[call-arg]
    plain = ChatAnthropic(model="claude-sonnet-4-5", api_key="x")  # type: ignore[call-arg]
    off = ContextGuardMiddleware(context_window=16_000)
    on = ContextGuardMiddleware(
        context_window=16_000, provider_drops_stale_thinking=True
    )
    assert sent_models(off, thinking)[0] is thinking
    assert sent_models(on, plain)[0] is plain


def test_by_default_only_a_binding_model_asks_for_drop_block():
    """A binding model's loop keeps a stale final-turn block: the API drops it."""
    fable = ChatAnthropic(
        model="claude-fable-5-1", api_key="x", thinking={"type": "adaptive"}
    )  # type: ignore[call-arg]
    opus = ChatAnthropic(model="claude-opus-5", api_key="x", thinking=THINKING)  # type: ignore[call-arg]
    middleware = ContextGuardMiddleware(context_window=16_000)
    [sent, _] = sent_models(middleware, fable)
    payload = sent._get_request_payload([HumanMessage("Fix the bug.")])
    assert payload["thinking"]["block_binding"] == DROP_BLOCK
    assert sent_models(ContextGuardMiddleware(context_window=16_000), opus)[0] is opus
    off = ContextGuardMiddleware(
        context_window=16_000, provider_drops_stale_thinking=False
    )
    assert sent_models(off, fable)[0] is fable


def test_a_binding_refusal_teaches_the_guard_and_is_retried_with_drop_block():
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage

    from langchain_context_guard import ContextGuard, GuardPolicy
    from langchain_context_guard.recovery import OverflowRecoveryMiddleware

    refusal = (
        "messages.1.content.0: Invalid `signature` in `thinking` block. The block "
        "is bound to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    model = ChatAnthropic(model="claude-opus-5", api_key="x", thinking=THINKING)  # type: ignore[call-arg]
    guard = ContextGuard(GuardPolicy(context_window=16_000))
    seen: list[object] = []

    def handler(request: ModelRequest) -> ModelResponse:
        seen.append(request.model)
        if len(seen) == 1:
            raise ValueError(refusal)
        return ModelResponse(result=[AIMessage("ok")])

    recovery = OverflowRecoveryMiddleware(guard)
    assert not guard.binds(model)
    request = ModelRequest(model=model, messages=[HumanMessage("Fix the bug.")])
    recovery.wrap_model_call(request, handler)
    assert guard.binds(model)  # remembered for this model
    assert seen[0] is model and seen[1].thinking["block_binding"] == DROP_BLOCK
    assert ContextGuardMiddleware(guard)._binds(model)  # the middleware asks too
