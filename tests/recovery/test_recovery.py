from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import cycle
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

from langchain_context_guard import (
    CompactionError,
    ConfigError,
    ContextGuard,
    ContextOverflowError,
    GuardEvent,
    OverflowInfo,
)
from langchain_context_guard.adapters._callbacks import EVENT_EVENT
from langchain_context_guard.compaction import CompactionSettings, Compactor
from langchain_context_guard.engine._messages import is_summary, marker
from langchain_context_guard.recovery._runnable import (
    RecoveryState,
    arecover_overflow,
    overflow_info,
    recover_overflow,
    with_overflow_recovery,
)
from tests.recovery._support import (
    OVERFLOW_ERRORS,
    STATES_LIMIT,
    drop_oldest_turn,
    history,
    limited_model,
    not_overflow_errors,
    small_policy,
    summarize,
)

LIMIT = 15_000
"""The fake model's hidden limit; ``history()`` is about 19k tokens."""


def make_guard(**overrides: Any) -> ContextGuard:
    return ContextGuard(small_policy(**overrides))


def kinds(events: Sequence[GuardEvent]) -> list[str]:
    return [e.kind for e in events]


@pytest.fixture
def msgs() -> list[BaseMessage]:
    return history()


def test_history_is_over_the_hidden_limit(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    tokens = guard.count_tokens(msgs)
    assert LIMIT < tokens < guard.policy.budget(60_000)
    assert int(tokens * 0.75) < LIMIT


# --- LCEL: every provider's error, with and without a compactor -------------


@pytest.mark.parametrize("provider", sorted(OVERFLOW_ERRORS))
@pytest.mark.parametrize("compact", [False, True], ids=["truncate", "compact"])
def test_runnable_recovers_from_each_provider(
    provider: str, compact: bool, msgs: list[BaseMessage]
) -> None:
    guard = make_guard()
    model = limited_model(LIMIT, overflow=OVERFLOW_ERRORS[provider])
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model, guard, compactor=summarize if compact else None, on_event=events.append
    )
    reply = wrapped.invoke(msgs)
    assert reply.content == "done"
    assert len(model.calls) == 2
    assert model.calls[0] > LIMIT >= model.calls[1]
    assert kinds(events) == ["overflow", "overflow_recovery"]
    step = "compact 1" if compact else "truncate"
    assert events[1].detail.startswith(step)
    learned = guard.limits.get("fake-limited")
    assert learned == (LIMIT if provider in STATES_LIMIT else None)


@pytest.mark.parametrize("provider", sorted(STATES_LIMIT))
def test_learned_limit_is_used_by_later_calls(
    provider: str, msgs: list[BaseMessage]
) -> None:
    guard = make_guard()
    model = limited_model(LIMIT, overflow=OVERFLOW_ERRORS[provider], repeat=2)
    wrapped = with_overflow_recovery(model, guard)
    wrapped.invoke(msgs)
    assert guard.window(model).tokens == LIMIT
    events: list[GuardEvent] = []
    again = with_overflow_recovery(model, guard, on_event=events.append)
    assert again.invoke(msgs).content == "done"
    assert len(model.calls) == 3
    assert model.calls[2] <= LIMIT
    assert events == []


def test_recovery_inside_a_chain(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    model = limited_model(LIMIT)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are a careful coding agent."), MessagesPlaceholder("history")]
    )
    chain = prompt | with_overflow_recovery(model, guard, compactor=summarize)
    reply = chain.invoke({"history": msgs[1:]})
    assert reply.content == "done"
    assert len(model.calls) == 2


async def test_events_reach_astream_events_consumers(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    model = limited_model(LIMIT)
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history")])
    chain = prompt | with_overflow_recovery(model, guard)
    kinds_seen = [
        event["data"]["kind"]
        async for event in chain.astream_events({"history": msgs}, version="v2")
        if event["event"] == "on_custom_event" and event["name"] == EVENT_EVENT
    ]
    assert kinds_seen == ["overflow", "overflow_recovery"]
    assert len(model.calls) == 2


def test_bound_tools_are_counted_and_kept(msgs: list[BaseMessage]) -> None:
    def bash(cmd: str) -> str:
        """Run a shell command."""
        return cmd

    guard = make_guard()
    model = limited_model(LIMIT)
    wrapped = with_overflow_recovery(model, guard).bind_tools([bash])
    assert wrapped.tools is not None and len(wrapped.tools) == 1
    assert wrapped.invoke(msgs).content == "done"
    with_tools = guard.count_tokens(msgs, tools=wrapped.tools)
    assert model.calls[0] == with_tools


async def test_ainvoke_with_async_compactor(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    model = limited_model(LIMIT)
    seen: list[int] = []

    async def acompact(messages: list[BaseMessage]) -> list[BaseMessage]:
        seen.append(len(messages))
        return summarize(messages)

    wrapped = with_overflow_recovery(model, guard, acompactor=acompact)
    reply = await wrapped.ainvoke(msgs)
    assert reply.content == "done"
    assert seen == [len(msgs)]
    assert len(model.calls) == 2


async def test_ainvoke_runs_a_sync_compactor(msgs: list[BaseMessage]) -> None:
    model = limited_model(LIMIT)
    wrapped = with_overflow_recovery(model, make_guard(), compactor=summarize)
    assert (await wrapped.ainvoke(msgs)).content == "done"
    assert len(model.calls) == 2


def test_sync_call_with_only_an_async_compactor_is_a_config_error(
    msgs: list[BaseMessage],
) -> None:
    async def acompact(messages: list[BaseMessage]) -> list[BaseMessage]:
        return messages

    model = limited_model(LIMIT)
    wrapped = with_overflow_recovery(model, make_guard(), acompactor=acompact)
    with pytest.raises(ConfigError, match="async compactor"):
        wrapped.invoke(msgs)


def test_batch_recovers_each_input(msgs: list[BaseMessage]) -> None:
    model = limited_model(LIMIT, repeat=3)
    wrapped = with_overflow_recovery(model, make_guard())
    replies = wrapped.batch([msgs, msgs[:4], msgs])
    assert [r.content for r in replies] == ["done"] * 3
    over = [tokens for tokens in model.calls if tokens > LIMIT]
    # The inputs run in threads on one guard: the second full input overflows
    # too, unless the first has taught the guard the limit before it is sent.
    assert 1 <= len(over) <= 2
    assert len(model.calls) == 3 + len(over)  # each overflow retried once


def test_stream_retries_before_the_first_chunk(msgs: list[BaseMessage]) -> None:
    model = limited_model(LIMIT, replies=["all tests pass now"])
    wrapped = with_overflow_recovery(model, make_guard())
    chunks = list(wrapped.stream(msgs))
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert "".join(str(c.content) for c in chunks) == "all tests pass now"
    assert len(chunks) > 1
    assert len(model.calls) == 2


async def test_astream_retries_before_the_first_chunk(
    msgs: list[BaseMessage],
) -> None:
    model = limited_model(LIMIT, replies=["all tests pass now"])
    wrapped = with_overflow_recovery(model, make_guard(), compactor=summarize)
    text = "".join([str(c.content) async for c in wrapped.astream(msgs)])
    assert text == "all tests pass now"
    assert len(model.calls) == 2


def test_string_and_prompt_value_inputs() -> None:
    model = limited_model(LIMIT, repeat=2)
    wrapped = with_overflow_recovery(model, make_guard())
    assert wrapped.invoke("hello").content == "done"
    prompt = ChatPromptTemplate.from_messages([("human", "{q}")])
    assert wrapped.invoke(prompt.invoke({"q": "hi"})).content == "done"


# --- stopping: clear error, bounded calls, never a rate limit ---------------


@pytest.mark.parametrize("compact", [False, True], ids=["truncate", "compact"])
@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_latest_user_message_alone_over_the_limit_stops(
    provider: str, compact: bool
) -> None:
    msgs = [
        SystemMessage("You are terse."),
        HumanMessage("hello " * (LIMIT * 2), id="huge"),
    ]
    model = limited_model(LIMIT, overflow=OVERFLOW_ERRORS[provider])
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model,
        make_guard(),
        compactor=summarize if compact else None,
        on_event=events.append,
    )
    with pytest.raises(ContextOverflowError) as err:
        wrapped.invoke(msgs)
    error = err.value
    assert len(model.calls) == 1
    assert error.attempts == 0
    assert error.tokens == model.calls[0]
    assert error.limit == (LIMIT if provider == "anthropic" else None)
    assert "reset the conversation" in str(error)
    assert "larger context window" in error.hint
    assert error.__cause__ is not None
    assert events[-1].kind == "overflow_recovery"
    assert events[-1].detail.startswith("stopped:")


@pytest.mark.parametrize(
    ("max_attempts", "calls"), [(0, 2), (1, 3), (3, 5)], ids=["0", "1", "3"]
)
def test_never_loops(max_attempts: int, calls: int, msgs: list[BaseMessage]) -> None:
    model = limited_model(10, overflow=OVERFLOW_ERRORS["bedrock"])
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model,
        make_guard(),
        compactor=drop_oldest_turn,
        max_attempts=max_attempts,
        on_event=events.append,
    )
    with pytest.raises(ContextOverflowError) as err:
        wrapped.invoke(msgs)
    assert len(model.calls) == calls
    assert err.value.attempts == calls - 1
    assert model.calls == sorted(model.calls, reverse=True)
    assert len(set(model.calls)) == calls
    assert kinds(events).count("overflow") == calls


def test_compactor_that_cannot_shrink_is_not_retried(
    msgs: list[BaseMessage],
) -> None:
    model = limited_model(10, overflow=OVERFLOW_ERRORS["bedrock"])
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model, make_guard(), compactor=lambda m: m, on_event=events.append
    )
    with pytest.raises(ContextOverflowError):
        wrapped.invoke(msgs)
    assert len(model.calls) == 2
    details = [e.detail for e in events if e.kind == "overflow_recovery"]
    assert details[0] == "compact 1 did not shrink the history"
    assert details[1].startswith("truncate")


def test_failed_compaction_moves_on_to_truncation(msgs: list[BaseMessage]) -> None:
    def broken(messages: list[BaseMessage]) -> list[BaseMessage]:
        raise CompactionError("summary timed out", reason="timeout")

    model = limited_model(LIMIT)
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model, make_guard(), compactor=broken, on_event=events.append
    )
    assert wrapped.invoke(msgs).content == "done"
    details = [e.detail for e in events if e.kind == "overflow_recovery"]
    assert details[0] == "compact 1 failed (timeout)"
    assert details[1].startswith("truncate")


def test_other_compactor_errors_propagate(msgs: list[BaseMessage]) -> None:
    def broken(messages: list[BaseMessage]) -> list[BaseMessage]:
        raise KeyError("bug")

    wrapped = with_overflow_recovery(
        limited_model(LIMIT), make_guard(), compactor=broken
    )
    with pytest.raises(KeyError):
        wrapped.invoke(msgs)


@pytest.mark.parametrize("name", sorted(not_overflow_errors()))
def test_rate_limit_billing_and_auth_errors_propagate_untouched(
    name: str, msgs: list[BaseMessage]
) -> None:
    error = not_overflow_errors()[name]
    model = limited_model(LIMIT, failure=error)
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model, make_guard(), compactor=summarize, on_event=events.append
    )
    with pytest.raises(type(error)) as err:
        wrapped.invoke(msgs)
    assert err.value is error
    assert len(model.calls) == 1
    assert events == []
    assert make_guard().limits.get("fake-limited") is None


def test_nested_wrappers_do_not_multiply_attempts(msgs: list[BaseMessage]) -> None:
    model = limited_model(10, overflow=OVERFLOW_ERRORS["bedrock"])
    guard = make_guard()
    inner = with_overflow_recovery(model, guard)
    outer = with_overflow_recovery(inner, guard)
    with pytest.raises(ContextOverflowError):
        outer.invoke(msgs)
    assert len(model.calls) == 2


def test_errors_after_the_first_chunk_are_not_retried() -> None:
    class Boom(Exception):
        pass

    def gen(_: Any) -> Any:
        yield AIMessageChunk("partial ")
        raise Boom("prompt is too long: 10 tokens > 5 maximum")

    from langchain_core.runnables import RunnableGenerator

    wrapped = with_overflow_recovery(RunnableGenerator(gen), make_guard())
    got: list[Any] = []
    with pytest.raises(Boom):
        for chunk in wrapped.stream("hi"):
            got.append(chunk)
    assert len(got) == 1


# --- the engine on its own ---------------------------------------------------


def info_for(provider: str, requested: int, limit: int) -> OverflowInfo:
    info = overflow_info(OVERFLOW_ERRORS[provider](requested, limit))
    assert info is not None
    return info


def test_recover_overflow_steps_through_the_chain(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    info = info_for("bedrock", 0, 0)
    first = recover_overflow(
        msgs, info, guard, compactor=drop_oldest_turn, max_attempts=2, model="m"
    )
    assert first.step == "compact"
    assert first.state == RecoveryState(attempts=1, compactions=1)
    assert len(first.messages) == len(msgs) - 2
    assert [e.kind for e in first.events] == ["overflow_recovery"]
    assert first.events[0].removed == ("ai-0", "tool-0-0")
    second = recover_overflow(
        first.messages,
        info,
        guard,
        state=first.state,
        compactor=drop_oldest_turn,
        max_attempts=2,
        model="m",
    )
    assert (second.step, second.state.compactions) == ("compact", 2)
    third = recover_overflow(
        second.messages,
        info,
        guard,
        state=second.state,
        compactor=drop_oldest_turn,
        max_attempts=2,
        model="m",
    )
    assert third.step == "truncate"
    assert third.state.truncated
    before = guard.count_tokens(second.messages)
    assert guard.count_tokens(third.messages) <= int(before * 0.75)
    with pytest.raises(ContextOverflowError, match="every step has been tried"):
        recover_overflow(
            third.messages,
            info,
            guard,
            state=third.state,
            compactor=drop_oldest_turn,
            max_attempts=2,
            model="m",
        )


def test_recover_overflow_does_not_mutate_its_input(msgs: list[BaseMessage]) -> None:
    snapshot = [m.model_copy(deep=True) for m in msgs]
    recover_overflow(msgs, info_for("anthropic", 19_000, LIMIT), make_guard())
    assert msgs == snapshot


def test_truncate_step_cuts_tool_results_before_dropping_turns() -> None:
    msgs = history(2, tool_words=6_000)
    guard = make_guard()
    tokens = guard.count_tokens(msgs)
    limit = int(tokens * 0.8)
    done = recover_overflow(msgs, info_for("anthropic", tokens, limit), guard)
    assert done.step == "truncate"
    assert [m.id for m in done.messages] == [m.id for m in msgs]
    cut = [m for m in done.messages if isinstance(m, ToolMessage)]
    assert all((marker(m) or {}).get("kind") == "truncated" for m in cut)
    assert guard.count_tokens(done.messages) <= limit - guard.policy.reserve_tokens


def test_compacted_history_is_fitted_to_the_learned_limit(
    msgs: list[BaseMessage],
) -> None:
    guard = make_guard()
    tokens = guard.count_tokens(msgs)
    done = recover_overflow(
        msgs,
        info_for("openai", tokens, 9_000),
        guard,
        compactor=lambda m: m[:-3] + m[-1:],
        model="gpt-test",
    )
    assert done.step == "compact"
    assert guard.limits.get("gpt-test") == 9_000
    assert guard.count_tokens(done.messages) <= 9_000 - guard.policy.reserve_tokens


def test_compactor_result_object_with_messages(msgs: list[BaseMessage]) -> None:
    class Result:
        def __init__(self, messages: list[BaseMessage]) -> None:
            self.messages = messages

    done = recover_overflow(
        msgs,
        info_for("bedrock", 0, 0),
        make_guard(),
        compactor=lambda m: Result(summarize(m)),
    )
    assert any(is_summary(m) for m in done.messages)


@pytest.mark.parametrize(
    ("scale", "expected"),
    [(1.0, 1.0), (1.25, 0.8), (4.0, 0.5), (0.5, 1.0)],
    ids=["same-count", "provider-counts-more", "clamped", "provider-counts-less"],
)
def test_limit_is_learned_in_the_guards_units(
    scale: float, expected: float, msgs: list[BaseMessage]
) -> None:
    guard = make_guard()
    tokens = guard.count_tokens(msgs)
    requested = int(tokens * scale)
    recover_overflow(msgs, info_for("anthropic", requested, 12_000), guard, model="m")
    learned = guard.limits.get("m")
    assert learned is not None
    assert abs(learned - 12_000 * expected) <= 12_000 * 0.001


def test_limit_is_learned_under_the_guards_model_name(
    msgs: list[BaseMessage],
) -> None:
    guard = make_guard(model="claude-test")
    recover_overflow(msgs, info_for("anthropic", 19_000, 15_000), guard)
    assert guard.limits.get("claude-test") == 15_000
    assert guard.window().tokens == 15_000


def test_overflow_event_is_logged_as_a_warning(
    msgs: list[BaseMessage], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="langchain_context_guard"):
        recover_overflow(msgs, info_for("anthropic", 19_000, LIMIT), make_guard())
    levels = {r.getMessage().split(";")[0]: r.levelno for r in caplog.records}
    assert levels["Context guard: overflow"] == logging.WARNING
    assert levels["Context guard: overflow_recovery"] == logging.INFO


async def test_arecover_overflow_matches_the_sync_chain(
    msgs: list[BaseMessage],
) -> None:
    info = info_for("anthropic", 19_000, LIMIT)
    sync = recover_overflow(msgs, info, make_guard(), compactor=summarize)
    done = await arecover_overflow(msgs, info, make_guard(), compactor=summarize)
    assert done.messages == sync.messages
    assert done.state == sync.state


def test_our_own_error_is_not_an_overflow() -> None:
    error = ContextOverflowError("still too long", tokens=10, limit=5, attempts=1)
    assert overflow_info(error) is None
    try:
        try:
            raise OVERFLOW_ERRORS["anthropic"](10, 5)
        except Exception as exc:
            raise error from exc
    except ContextOverflowError as chained:
        assert overflow_info(chained) is None


def test_negative_max_attempts_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="max_attempts"):
        with_overflow_recovery(limited_model(LIMIT), make_guard(), max_attempts=-1)


def test_reply_is_the_model_message(msgs: list[BaseMessage]) -> None:
    reply = with_overflow_recovery(limited_model(LIMIT), make_guard()).invoke(msgs)
    assert isinstance(reply, AIMessage)


def real_compactor(guard: ContextGuard) -> Compactor:
    summarizer = GenericFakeChatModel(
        messages=cycle(["The agent read six files; nothing is fixed yet."])
    )
    return Compactor(
        summarizer, CompactionSettings(keep=("tokens", 4_000)), guard=guard
    )


def test_a_compaction_compactor_is_used_directly(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    model = limited_model(LIMIT, overflow=OVERFLOW_ERRORS["bedrock"])
    events: list[GuardEvent] = []
    wrapped = with_overflow_recovery(
        model, guard, compactor=real_compactor(guard), on_event=events.append
    )
    assert wrapped.invoke(msgs).content == "done"
    assert events[1].detail.startswith("compact 1")
    assert len(model.calls) == 2


async def test_a_compaction_compactor_is_used_async(msgs: list[BaseMessage]) -> None:
    guard = make_guard()
    model = limited_model(LIMIT)
    wrapped = with_overflow_recovery(model, guard, compactor=real_compactor(guard))
    assert (await wrapped.ainvoke(msgs)).content == "done"
    assert len(model.calls) == 2
