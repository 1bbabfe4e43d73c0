from __future__ import annotations

import logging
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.prompt_values import ChatPromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda

from langchain_context_guard import ContextGuard, InvalidInputError
from langchain_context_guard.adapters._callbacks import EVENT_EVENT, REPORT_EVENT, emit
from langchain_context_guard.adapters._runnable import GuardRunnable, as_runnable
from tests.adapters._support import (
    BIG_TOOL,
    BUDGET,
    SYSTEM,
    TOOLS,
    check_model_input,
    long_history,
    make_guard,
)
from tests.fakes import ScriptedToolModel, pairing_errors

HISTORY = long_history(30)


@pytest.fixture(scope="module")
def guard() -> ContextGuard:
    return make_guard()


def _expected(guard: ContextGuard, tools: Any = None) -> list[BaseMessage]:
    return guard.prepare(HISTORY, tools=tools).messages


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(HISTORY, id="list"),
        pytest.param(tuple(HISTORY), id="tuple"),
        pytest.param(ChatPromptValue(messages=HISTORY), id="prompt-value"),
        pytest.param({"messages": HISTORY, "other": 1}, id="dict"),
    ],
)
def test_accepts_messages_prompt_values_and_dicts(
    guard: ContextGuard, value: Any
) -> None:
    out = as_runnable(guard).invoke(value)
    assert out == _expected(guard)
    assert len(out) < len(HISTORY)
    assert guard.count_tokens(out) <= BUDGET


def test_dict_key_is_configurable(guard: ContextGuard) -> None:
    runnable = as_runnable(guard, messages_key="history")
    assert runnable.invoke({"history": HISTORY}) == _expected(guard)
    with pytest.raises(InvalidInputError, match="'history'"):
        runnable.invoke({"messages": HISTORY})


def test_input_is_never_mutated(guard: ContextGuard) -> None:
    copy = [m.model_copy() for m in HISTORY]
    as_runnable(guard).invoke(HISTORY)
    assert copy == HISTORY


async def test_invoke_ainvoke_batch_and_stream_agree(guard: ContextGuard) -> None:
    runnable = as_runnable(guard, tools=TOOLS)
    expected = _expected(guard, TOOLS)
    assert runnable.invoke(HISTORY) == expected
    assert await runnable.ainvoke(HISTORY) == expected
    assert runnable.batch([HISTORY, HISTORY[:5]]) == [
        expected,
        guard.prepare(HISTORY[:5], tools=TOOLS).messages,
    ]
    assert await runnable.abatch([HISTORY]) == [expected]
    assert list(runnable.stream(HISTORY)) == [expected]
    assert [c async for c in runnable.astream(HISTORY)] == [expected]


def test_tools_count_against_the_budget() -> None:
    guard = make_guard(stable_prefix=False, digest=False)  # fitted to its budget
    tools = [*TOOLS, BIG_TOOL]
    with_tools = as_runnable(guard, tools=tools).invoke(HISTORY)
    assert guard.count_tokens(with_tools, tools=tools) <= BUDGET
    assert guard.count_tokens(with_tools) < guard.count_tokens(_expected(guard)) - 4_000


def test_model_argument_picks_the_window() -> None:
    guard = ContextGuard()  # no override: the window comes from the model
    model = ScriptedToolModel(steps=0, profile={"max_input_tokens": 24_000})
    runnable = as_runnable(guard, model=model)
    out = runnable.invoke(HISTORY)
    assert guard.count_tokens(out) <= 24_000 - guard.policy.reserve_tokens


def test_prompt_guard_model_compose_like_seed_003_assembler(
    guard: ContextGuard,
) -> None:
    """System + guarded history + the new user message (seed 003's assembler)."""
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", SYSTEM),
            MessagesPlaceholder("history"),
            ("human", "{question}"),
        ]
    )
    model = ScriptedToolModel(steps=0)
    chain = prompt | as_runnable(guard, tools=TOOLS) | model.bind_tools(TOOLS)
    history = HISTORY[1:]  # the prompt supplies the system message
    reply = chain.invoke({"history": history, "question": "Where is the bug?"})
    assert reply.text == "Done after 0 reads."
    [sent] = model.received
    check_model_input(guard, sent, user_text="Where is the bug?", tools=TOOLS)
    assert sent[-1] == HumanMessage("Where is the bug?")
    assert len(sent) < len(history) + 2


class _Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.events.append((name, data))


def test_report_and_events_reach_callbacks() -> None:
    guard = make_guard()  # a first call: it prunes (a later one may reuse)
    recorder = _Recorder()
    out = as_runnable(guard).invoke(HISTORY, {"callbacks": [recorder]})
    names = [name for name, _ in recorder.events]
    assert names[-1] == REPORT_EVENT
    assert EVENT_EVENT in names
    report = recorder.events[-1][1]
    assert report["source"] == "runnable"
    assert report["tokens_after"] == guard.count_tokens(out)
    assert report["budget"] == BUDGET
    kinds = [data["kind"] for name, data in recorder.events if name == EVENT_EVENT]
    assert kinds == [e["kind"] for e in report["events"]]
    assert "trim" in kinds


async def test_report_shows_in_astream_events(guard: ContextGuard) -> None:
    chain = RunnableLambda(lambda h: h) | as_runnable(guard)
    custom = [
        event
        async for event in chain.astream_events(HISTORY, version="v2")
        if event["event"] == "on_custom_event"
    ]
    assert {e["name"] for e in custom} == {REPORT_EVENT, EVENT_EVENT}
    report = next(e for e in custom if e["name"] == REPORT_EVENT)
    assert report["data"]["tokens_after"] <= report["data"]["budget"] == BUDGET


def test_emit_outside_a_run_only_logs(
    guard: ContextGuard, caplog: pytest.LogCaptureFixture
) -> None:
    report = guard.prepare(HISTORY).report
    with caplog.at_level(logging.INFO, logger="langchain_context_guard"):
        emit(report, source="test")
    assert "Context guard (test)" in caplog.text
    assert f"budget {BUDGET:,}" in caplog.text


def test_output_is_paired_and_schema_is_typed(guard: ContextGuard) -> None:
    runnable = as_runnable(guard)
    assert isinstance(runnable, GuardRunnable)
    assert runnable.get_name() == "ContextGuard"
    assert "anyOf" in runnable.get_input_schema().model_json_schema()
    assert pairing_errors(runnable.invoke(HISTORY)) == []
