"""Usage calibration through the LCEL step when messages carry no ids."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from pydantic import Field

from langchain_context_guard import (
    ContextGuard,
    GuardPolicy,
    UsageMissingWarning,
    as_runnable,
)
from langchain_context_guard.engine import without_usage
from tests.adapters._support import big_output

LIMIT = 16_000
REFERENCE = ContextGuard(GuardPolicy(usage_anchoring=False))


class DenseModel(GenericFakeChatModel):
    """Calls a tool every turn; counts ``ratio(step)`` tokens for each of ours.

    Its reply's ``usage_metadata.input_tokens`` is that count, and ``seen`` holds
    it for every call: what must stay under the provider's limit.
    """

    messages: Any = Field(default_factory=lambda: iter(()))
    ratio: Callable[[int], float]
    seen: list[int] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        step = len(self.seen)
        tokens = math.ceil(self.ratio(step) * REFERENCE.count_tokens(messages))
        self.seen.append(tokens)
        reply = AIMessage(
            "",
            tool_calls=[{"name": "read", "args": {"k": step}, "id": f"c{step}"}],
            usage_metadata={
                "input_tokens": tokens,
                "output_tokens": 20,
                "total_tokens": tokens + 20,
            },
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.mark.parametrize(
    "ratio",
    [lambda step: 1.25, lambda step: 1.0 if step < 3 else 1.25],
    ids=["denser-tokenizer", "wrong-early-ratio"],
)
def test_an_lcel_loop_without_ids_calibrates_and_stays_under_the_limit(
    ratio: Callable[[int], float],
) -> None:
    guard = ContextGuard(GuardPolicy(context_window=LIMIT, reserve_tokens=1_000))
    model = DenseModel(ratio=ratio)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a careful coding agent."), MessagesPlaceholder("history")]
    )
    chain = prompt | as_runnable(guard) | model
    history: list[BaseMessage] = [HumanMessage("Read the repository.")]
    for step in range(40):
        reply = chain.invoke({"history": history})
        reply = reply.model_copy(update={"id": None})
        call = reply.tool_calls[0]
        output = big_output(step)[:6_000]
        history += [reply, ToolMessage(output, tool_call_id=call["id"])]
    over = [(k, t) for k, t in enumerate(model.seen) if t > LIMIT]
    assert over == []
    assert len(model.seen) == 40


# --- a streamed reply without usage ---------------------------------------------


def _streamed_reply(model: GenericFakeChatModel, history: list[BaseMessage]) -> Any:
    chunks = list(model.stream(history))
    reply = chunks[0]
    for chunk in chunks[1:]:
        reply += chunk
    return reply


def test_a_stream_without_usage_warns_once_per_guard() -> None:
    guard = ContextGuard(GuardPolicy(reserve_tokens=1_000))
    model = GenericFakeChatModel(messages=iter(["first answer", "second", "third"]))
    chain = as_runnable(guard) | model
    history: list[BaseMessage] = [HumanMessage("Hello there.")]
    for step in range(3):
        reply = _streamed_reply(chain, history)  # type: ignore[arg-type]
        assert reply.usage_metadata is None
        history += [reply, HumanMessage(f"Go on ({step}).")]
        if step == 0:
            with pytest.warns(UsageMissingWarning, match=r"stream_usage=True"):
                as_runnable(guard).invoke(history)
        else:  # once per guard: any further warning fails the test
            as_runnable(guard).invoke(history)
    with pytest.warns(UsageMissingWarning):  # a new guard warns again
        as_runnable(ContextGuard()).invoke(history)


class NoUsageChatModel(GenericFakeChatModel):
    """Like a chat model streamed with ``stream_usage=False``: no usage comes back."""

    stream_usage: bool = False


def test_a_model_set_not_to_stream_usage_warns() -> None:
    guard = ContextGuard(GuardPolicy(reserve_tokens=1_000))
    model = NoUsageChatModel(messages=iter(["answer"]))
    history: list[BaseMessage] = [HumanMessage("Hello there.")]
    guard.prepare(history, model=model)
    history += [model.invoke(history), HumanMessage("And?")]
    with pytest.warns(UsageMissingWarning, match="no usage_metadata"):
        guard.prepare(history, model=model)


def test_replies_with_usage_or_from_other_models_do_not_warn() -> None:
    guard = ContextGuard(GuardPolicy(reserve_tokens=1_000))
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    streamed = AIMessageChunk("hi", usage_metadata=usage)  # type: ignore[arg-type]
    plain = AIMessage("hi")  # a model that reports no usage, not streamed
    for reply in (streamed, plain):
        guard.prepare([HumanMessage("Hello."), reply, HumanMessage("And?")])


def test_a_reply_whose_usage_compaction_cleared_does_not_warn() -> None:
    # A compaction keeps replies without their usage (it counted the prompt
    # before it); the guard must not take them for replies that reported none.
    guard = ContextGuard(GuardPolicy(reserve_tokens=1_000))
    model = NoUsageChatModel(messages=iter(["answer"]))
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    reply = AIMessage("hi", usage_metadata=usage)  # type: ignore[arg-type]
    kept = without_usage(reply)
    assert kept.usage_metadata is None  # type: ignore[attr-defined]
    assert reply.usage_metadata == usage  # the caller's message is untouched
    guard.prepare([HumanMessage("Hello."), kept, HumanMessage("And?")], model=model)
    with pytest.warns(UsageMissingWarning):  # a reply with none still warns
        plain = AIMessage("hi")
        ContextGuard(GuardPolicy(reserve_tokens=1_000)).prepare(
            [HumanMessage("Hello."), plain, HumanMessage("And?")], model=model
        )
