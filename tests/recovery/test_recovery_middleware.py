from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.errors import GraphInterrupt

from langchain_context_guard import (
    ConfigError,
    ContextGuard,
    ContextOverflowError,
    GuardEvent,
)
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.recovery._middleware import OverflowRecoveryMiddleware
from tests.recovery._support import (
    OVERFLOW_ERRORS,
    filler,
    limited_model,
    not_overflow_errors,
    small_policy,
    summarize,
)

LIMIT = 15_000


@tool
def bash(cmd: str) -> str:
    """Run a shell command and return its output."""
    return filler(9_000, seed=len(cmd))


CALL = AIMessage(
    "", tool_calls=[{"name": "bash", "args": {"cmd": "cat build.log"}, "id": "c1"}]
)


def agent_model(**kwargs: Any) -> Any:
    return limited_model(LIMIT, replies=[CALL, "done", "you are welcome"], **kwargs)


def test_tool_output_alone_overflows() -> None:
    guard = ContextGuard(small_policy())
    out = ToolMessage(bash.invoke({"cmd": "cat build.log"}), tool_call_id="c1")
    assert LIMIT < guard.count_tokens([out]) < 0.5 * guard.policy.budget(60_000)


@pytest.mark.parametrize("compact", [False, True], ids=["truncate", "compact"])
def test_agent_recovers_with_sqlite_checkpointer(compact: bool, tmp_path: Path) -> None:
    guard = ContextGuard(small_policy())
    model = agent_model()
    events: list[GuardEvent] = []
    recovery = OverflowRecoveryMiddleware(
        guard, compactor=summarize if compact else None, on_event=events.append
    )
    config: Any = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "ckpt.sqlite")) as saver:
        agent = create_agent(
            model,
            [bash],
            system_prompt="You are a careful coding agent.",
            middleware=[recovery],
            checkpointer=saver,
        )
        state = agent.invoke(
            {"messages": [HumanMessage("Why does the build fail?")]}, config
        )
        assert state["messages"][-1].content == "done"
        assert len(model.calls) == 3
        assert model.calls[1] > LIMIT >= model.calls[2]
        stored = agent.get_state(config).values["messages"]
        tool_out = next(m for m in stored if isinstance(m, ToolMessage))
        assert tool_out.content == bash.invoke({"cmd": "cat build.log"})
        details = [e.detail.split(":")[0] for e in events[1:]]
        if compact:  # the task is the last user turn: nothing to summarize
            assert details == ["compact 1 did not shrink the history", "truncate"]
        else:
            assert details == ["truncate"]
        assert events[0].kind == "overflow"
        assert guard.limits.get("fake-limited") == LIMIT

        # Without ContextGuardMiddleware the next turn overflows again and recovers.
        state = agent.invoke({"messages": [HumanMessage("Thanks!")]}, config)
        assert state["messages"][-1].content == "you are welcome"
        assert len(model.calls) == 5


def test_learned_limit_applies_to_later_calls_with_the_guard_middleware(
    tmp_path: Path,
) -> None:
    guard = ContextGuard(small_policy())
    model = agent_model()
    config: Any = {"configurable": {"thread_id": "t2"}}
    with SqliteSaver.from_conn_string(str(tmp_path / "ckpt.sqlite")) as saver:
        agent = create_agent(
            model,
            [bash],
            system_prompt="You are a careful coding agent.",
            middleware=[
                ContextGuardMiddleware(guard),
                OverflowRecoveryMiddleware(guard),
            ],
            checkpointer=saver,
        )
        agent.invoke({"messages": [HumanMessage("Why does the build fail?")]}, config)
        assert len(model.calls) == 3
        state = agent.invoke({"messages": [HumanMessage("Thanks!")]}, config)
        assert state["messages"][-1].content == "you are welcome"
        assert len(model.calls) == 4
        assert model.calls[3] <= LIMIT


async def test_async_agent_recovers(tmp_path: Path) -> None:
    guard = ContextGuard(small_policy())
    model = agent_model()

    async def acompact(messages: list[Any]) -> list[Any]:
        return summarize(messages)

    recovery = OverflowRecoveryMiddleware(guard, acompactor=acompact)
    config: Any = {"configurable": {"thread_id": "t3"}}
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
        agent = create_agent(model, [bash], middleware=[recovery], checkpointer=saver)
        state = await agent.ainvoke(
            {"messages": [HumanMessage("Why does the build fail?")]}, config
        )
    assert state["messages"][-1].content == "done"
    assert len(model.calls) == 3


def test_agent_stops_with_a_clear_error_when_the_question_is_too_long() -> None:
    guard = ContextGuard(small_policy())
    model = agent_model()
    agent = create_agent(model, [bash], middleware=[OverflowRecoveryMiddleware(guard)])
    with pytest.raises(ContextOverflowError) as err:
        agent.invoke({"messages": [HumanMessage("why " * (2 * LIMIT))]})
    assert len(model.calls) == 1
    assert err.value.limit == LIMIT


@pytest.mark.parametrize("name", ["openai-tpm", "anthropic-credit", "openai-auth"])
def test_agent_never_treats_rate_limits_as_overflow(name: str) -> None:
    error = not_overflow_errors()[name]
    model = agent_model(failure=error)
    events: list[GuardEvent] = []
    middleware = OverflowRecoveryMiddleware(
        ContextGuard(small_policy()), compactor=summarize, on_event=events.append
    )
    agent = create_agent(model, [bash], middleware=[middleware])
    with pytest.raises(type(error)) as err:
        agent.invoke({"messages": [HumanMessage("hi")]})
    assert err.value is error
    assert len(model.calls) == 1
    assert events == []


def request_for(messages: list[Any], **kwargs: Any) -> ModelRequest[Any]:
    return ModelRequest(
        model=limited_model(LIMIT),
        messages=messages,
        system_message=SystemMessage("sys"),
        **kwargs,
    )


def test_wrap_model_call_keeps_the_system_message_separate() -> None:
    middleware = OverflowRecoveryMiddleware(ContextGuard(small_policy()))
    seen: list[ModelRequest[Any]] = []
    big = ToolMessage(filler(9_000), tool_call_id="c1")

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        if len(seen) == 1:
            raise OVERFLOW_ERRORS["anthropic"](20_000, LIMIT)
        return ModelResponse(result=[AIMessage("ok")])

    request = request_for([HumanMessage("q"), CALL, big])
    result = middleware.wrap_model_call(request, handler)
    assert isinstance(result, ModelResponse)
    retried = seen[1]
    assert retried.system_message is request.system_message
    assert not any(isinstance(m, SystemMessage) for m in retried.messages)
    assert len(retried.messages) == 3
    assert retried.messages[2] is not big


def test_graph_interrupts_pass_through() -> None:
    middleware = OverflowRecoveryMiddleware(ContextGuard(small_policy()))

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise GraphInterrupt(())

    with pytest.raises(GraphInterrupt):
        middleware.wrap_model_call(request_for([HumanMessage("q")]), handler)


def test_sync_agent_with_only_an_async_compactor_is_a_config_error() -> None:
    async def acompact(messages: list[Any]) -> list[Any]:
        return messages

    middleware = OverflowRecoveryMiddleware(
        ContextGuard(small_policy()), acompactor=acompact
    )

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        raise OVERFLOW_ERRORS["anthropic"](20_000, LIMIT)

    with pytest.raises(ConfigError, match="async compactor"):
        middleware.wrap_model_call(request_for([HumanMessage("q")]), handler)


def test_missing_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "langchain_context_guard.recovery._middleware")
    with pytest.raises(ImportError, match=r"langchain-context-guard\[agents\]"):
        importlib.import_module("langchain_context_guard.recovery._middleware")
