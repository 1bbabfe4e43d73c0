"""Usage by category from the adapters: a custom event, reply metadata, a note."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda

from langchain_context_guard import MARKER_KEY, ContextGuard, GuardPolicy
from langchain_context_guard.adapters import USAGE_EVENT, as_runnable
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.adapters._requests import USAGE_KEY
from tests.adapters._support import long_history
from tests.fakes import ScriptedChatModel

HISTORY = long_history(30)
WINDOW = 40_000


def _guard(**policy: Any) -> ContextGuard:
    return ContextGuard(GuardPolicy(context_window=WINDOW, **policy))


async def _custom(guard: ContextGuard) -> tuple[list[dict[str, Any]], list[Any]]:
    chain = RunnableLambda(lambda h: h) | as_runnable(guard)
    events, out = [], []
    async for event in chain.astream_events(HISTORY, version="v2"):
        if event["event"] == "on_custom_event" and event["name"] == USAGE_EVENT:
            events.append(event["data"])
        if event["event"] == "on_chain_end" and event["name"] == "RunnableSequence":
            out = event["data"]["output"]
    return events, out


async def test_the_runnable_streams_usage_when_asked() -> None:
    guard = _guard(report_usage=True)
    [usage], sent = await _custom(guard)
    assert usage["source"] == "runnable"
    assert usage["total"] == guard.context_usage(sent).total > 0
    assert usage["window"] == WINDOW and 0 < usage["share"] < 1
    assert usage["tool_results"] > 0


async def test_no_usage_event_by_default() -> None:
    events, sent = await _custom(_guard())
    assert events == [] and sent


def _agent(model: ScriptedChatModel, **policy: Any) -> Any:
    middleware = ContextGuardMiddleware(_guard(**policy))
    return create_agent(model, [], middleware=[middleware])


def test_the_middleware_puts_usage_in_the_reply_metadata() -> None:
    model = ScriptedChatModel(messages=iter(["done"]))
    state = _agent(model, report_usage=True).invoke({"messages": HISTORY})
    reply = state["messages"][-1]
    assert isinstance(reply, AIMessage)
    usage = reply.response_metadata[USAGE_KEY]
    [sent] = model.received
    assert usage["total"] == _guard().context_usage(sent).total
    assert usage["messages"] == len(sent)


def test_the_middleware_adds_no_metadata_by_default() -> None:
    model = ScriptedChatModel(messages=iter(["done"]))
    state = _agent(model).invoke({"messages": HISTORY})
    assert USAGE_KEY not in state["messages"][-1].response_metadata


def test_a_note_tells_the_model_past_a_fraction_and_is_not_stored() -> None:
    model = ScriptedChatModel(messages=iter(["done"]))
    state = _agent(model, usage_notices=(0.1, 0.2)).invoke({"messages": HISTORY})
    [sent] = model.received
    note = sent[-1]
    assert isinstance(note, HumanMessage)
    assert note.additional_kwargs[MARKER_KEY]["kind"] == "usage_notice"
    assert "over 20% of your 40,000-token context window" in str(note.content)
    assert not any(map(_is_note, state["messages"]))


def test_no_note_below_the_fractions() -> None:
    model = ScriptedChatModel(messages=iter(["done"]))
    _agent(model, usage_notices=(0.99,)).invoke({"messages": HISTORY[:3]})
    [sent] = model.received
    assert sent and not any(map(_is_note, sent))


def _is_note(message: BaseMessage) -> bool:
    mark = message.additional_kwargs.get(MARKER_KEY) or {}
    return bool(mark.get("kind") == "usage_notice")


def test_the_reported_usage_counts_the_note_sent() -> None:
    """What the model got, note included: the note is among the ``notes``."""
    model = ScriptedChatModel(messages=iter(["done"]))
    agent = _agent(model, usage_notices=(0.1,), report_usage=True)
    state = agent.invoke({"messages": HISTORY})
    [sent] = model.received
    assert _is_note(sent[-1])
    usage = state["messages"][-1].response_metadata[USAGE_KEY]
    counted = _guard().context_usage(sent)
    assert usage["total"] == counted.total
    assert usage["notes"] == counted.notes > 0
    assert usage["messages"] == len(sent)


def test_a_model_that_binds_its_thinking_gets_no_note() -> None:
    """The next call leaves the note out: the reply's block would be stale."""
    model = ScriptedChatModel(messages=iter(["done"]))
    agent = _agent(model, usage_notices=(0.1,), report_usage=True, bound_thinking=True)
    state = agent.invoke({"messages": HISTORY})
    [sent] = model.received
    assert not any(map(_is_note, sent))
    usage = state["messages"][-1].response_metadata[USAGE_KEY]
    assert usage["total"] == _guard().context_usage(sent).total
