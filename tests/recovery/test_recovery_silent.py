"""A silent overflow (the reply reports more input than the window) is recovered.

The scripted model answers whatever it is sent, as z.ai and some OpenAI-compatible
servers do, and reports its input as a denser tokenizer would count it
(``FACTOR`` times the guard's count): our pruning under the window is then over it
by the provider's count. The recovery chain drops that reply and retries the call
pruned under the window scaled by how the provider counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from pydantic import Field

from langchain_context_guard import ContextGuard, GuardEvent, GuardPolicy
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.recovery._middleware import OverflowRecoveryMiddleware
from langchain_context_guard.recovery._runnable import with_overflow_recovery
from tests.fakes import ScriptedChatModel
from tests.recovery._support import history

WINDOW = 30_000
FACTOR = 1.6
"""The provider counts 1.6 tokens for each of ours (``history()`` is ~19k)."""


def policy() -> GuardPolicy:
    return GuardPolicy(
        reserve_tokens=1_000,
        hard_min_tokens=1_000,
        warn_below_tokens=1,
        max_tool_result_share=0.5,  # big results prune, rather than being cut
    )


COUNTER = ContextGuard(policy())


class DenseCountModel(ScriptedChatModel):
    """Answers anything; reports ``FACTOR`` x our count (or ``fixed``) as input."""

    model_name: str = "dense-count"
    factor: float = FACTOR
    fixed: int | None = None
    reported: list[int] = Field(default_factory=list)

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        ours = COUNTER.count_tokens(messages, tools=kwargs.get("tools"))
        tokens = self.fixed or int(ours * self.factor)
        self.reported.append(tokens)
        usage = {"input_tokens": tokens, "output_tokens": 5, "total_tokens": tokens + 5}
        return super().reply(messages).model_copy(update={"usage_metadata": usage})


def dense_model(*replies: str, **kwargs: Any) -> DenseCountModel:
    return DenseCountModel(
        messages=iter(replies or ("first", "second", "third")),
        profile={"max_input_tokens": WINDOW},
        **kwargs,
    )


def test_the_history_fits_our_count_but_not_the_providers() -> None:
    tokens = COUNTER.count_tokens(history())
    assert tokens < WINDOW - 1_000 < tokens * FACTOR


@pytest.mark.parametrize("run", ["invoke", "ainvoke"])
def test_runnable_retries_a_silent_overflow_pruned(run: str) -> None:
    model = dense_model()
    guard = ContextGuard(policy())
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(model, guard, on_event=events.append)
    if run == "invoke":
        reply = wrapped.invoke(history())
    else:
        reply = asyncio.run(wrapped.ainvoke(history()))
    assert reply.content == "second"  # the first, from a cut prompt, is dropped
    assert model.reported[0] > WINDOW >= model.reported[1]
    assert [e.kind for e in events] == ["overflow", "overflow_recovery"]
    assert "silent overflow" in events[0].detail
    # Learned in our units, so later calls are pruned under it at once.
    learned = guard.window(model)
    assert learned.source == "learned" and learned.tokens < WINDOW
    again = with_overflow_recovery(model, guard).invoke(history())
    assert again.content == "third" and model.reported[2] <= WINDOW


def test_silent_retry_can_be_turned_off() -> None:
    model = dense_model()
    wrapped = with_overflow_recovery(
        model, ContextGuard(policy()), retry_silent_overflow=False
    )
    assert wrapped.invoke(history()).content == "first"
    assert len(model.reported) == 1


def test_when_nothing_is_left_to_cut_the_reply_is_kept() -> None:
    model = dense_model(fixed=90_000)  # whatever it is sent
    events: list[GuardEvent] = []
    guard = ContextGuard(policy())
    wrapped = with_overflow_recovery(model, guard, on_event=events.append)
    reply = wrapped.invoke(history())
    assert reply.content == "second"  # the truncated retry's, not an error
    assert len(model.reported) == 2
    assert events[-1].detail.startswith("stopped:")


def test_agent_middleware_retries_and_keeps_only_the_fitting_reply() -> None:
    model = dense_model("first", "second")
    guard_mw = ContextGuardMiddleware(policy())
    recovery = OverflowRecoveryMiddleware(guard_mw.guard)
    agent = create_agent(model, [], middleware=[guard_mw, recovery])
    msgs = [*history()[1:-1], HumanMessage("What next?")]
    state = agent.invoke({"messages": msgs})
    replies = [m for m in state["messages"] if isinstance(m, AIMessage)]
    assert replies[-1].content == "second"
    assert "first" not in [m.content for m in replies]
    assert model.reported[0] > WINDOW >= model.reported[1]
    assert guard_mw.guard.window(model).source == "learned"


class DenseStreamModel(DenseCountModel):
    """Streams its reply, then a last chunk with the usage (as OpenAI does)."""

    disable_streaming: bool = False

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._generate(messages, stop, None, **kwargs).generations[0].message
        assert isinstance(reply, AIMessage)
        yield ChatGenerationChunk(message=AIMessageChunk(content=reply.content))
        last = AIMessageChunk(content="", usage_metadata=reply.usage_metadata)
        yield ChatGenerationChunk(message=last)


@pytest.mark.parametrize("run", ["stream", "astream"])
def test_a_streamed_silent_overflow_is_learned_not_retried(
    run: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = DenseStreamModel(
        messages=iter(["first", "second"]), profile={"max_input_tokens": WINDOW}
    )
    guard = ContextGuard(policy())
    wrapped = with_overflow_recovery(model, guard)

    async def collect() -> list[Any]:
        return [c async for c in wrapped.astream(history())]

    with caplog.at_level(logging.WARNING, logger="langchain_context_guard"):
        if run == "stream":
            chunks = list(wrapped.stream(history()))
        else:
            chunks = asyncio.run(collect())
    assert "".join(str(c.content) for c in chunks) == "first"  # already yielded
    assert len(model.reported) == 1 and model.reported[0] > WINDOW
    assert "later calls are pruned under a learned limit" in caplog.text
    assert guard.window(model).source == "learned"
    # The next call is pruned under the learned limit at once: no retry needed.
    assert wrapped.invoke(history()).content == "second"
    assert len(model.reported) == 2 and model.reported[1] <= WINDOW
