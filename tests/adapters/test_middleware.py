from __future__ import annotations

import importlib
import itertools
import logging
import re
import sys
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain.agents.structured_output import ToolStrategy
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import BaseModel, Field

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._callbacks import EVENT_EVENT, REPORT_EVENT
from langchain_context_guard.adapters._middleware import ContextGuardMiddleware
from langchain_context_guard.engine._messages import holds_reply
from tests.adapters._support import (
    BIG_TOOL,
    RESERVE,
    SYSTEM,
    TOOLS,
    WINDOW,
    check_model_input,
    full_length,
    long_history,
)
from tests.fakes import ScriptedToolModel, tool_history

USER = "Read every chunk, then summarise the repository."
STEPS = 100
BUDGET = WINDOW - RESERVE
PROFILE = {"max_input_tokens": WINDOW}


def _policy() -> GuardPolicy:
    """Big results prune, rather than being cut to the default 0.1 of the budget."""
    return GuardPolicy(
        reserve_tokens=RESERVE, warn_below_tokens=16_000, max_tool_result_share=0.5
    )


@pytest.fixture(scope="module")
def guard() -> ContextGuard:
    """No window override: each call's window comes from ``request.model``."""
    return ContextGuard(_policy())


def _config(thread: str, **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1_000, **extra}


def _agent(guard: ContextGuard, chat: ScriptedToolModel, saver: Any, **kw: Any) -> Any:
    middleware = ContextGuardMiddleware(guard, **kw)
    return create_agent(
        chat, TOOLS, system_prompt=SYSTEM, middleware=[middleware], checkpointer=saver
    )


def _check_inputs(guard: ContextGuard, model: ScriptedToolModel, user: str) -> None:
    for received in model.received:
        check_model_input(guard, received, user_text=user, tools=TOOLS, budget=BUDGET)


class _Reports(BaseCallbackHandler):
    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if name == REPORT_EVENT:
            self.reports.append(data)


def test_create_agent_prunes_each_call_and_leaves_state(guard: ContextGuard) -> None:
    model = ScriptedToolModel(steps=STEPS, profile=PROFILE)
    agent = _agent(guard, model, InMemorySaver())
    recorder = _Reports()
    snapshots = [
        s["messages"]
        for s in agent.stream(
            {"messages": [("user", USER)]},
            _config("t", callbacks=[recorder]),
            stream_mode="values",
        )
    ]
    final = snapshots[-1]
    assert len(final) == full_length(STEPS)
    for state in snapshots:
        assert [m.id for m in state] == [m.id for m in final][: len(state)]
    assert len(model.received) == STEPS + 1
    _check_inputs(guard, model, USER)
    assert max(len(r) for r in model.received) < full_length(STEPS) // 4
    assert len(recorder.reports) == STEPS + 1
    assert {r["window_source"] for r in recorder.reports} == {"model_profile"}
    assert {r["context_window"] for r in recorder.reports} == {WINDOW}


def test_persist_rewrites_state_on_sqlite_and_resumes(
    guard: ContextGuard, tmp_path: Path
) -> None:
    path = str(tmp_path / "agent.sqlite")
    model = ScriptedToolModel(steps=STEPS, profile=PROFILE)
    with SqliteSaver.from_conn_string(path) as saver:
        agent = _agent(guard, model, saver, persist=True, model=model)
        snapshots = [
            s["messages"]
            for s in agent.stream(
                {"messages": [("user", USER)]}, _config("p"), stream_mode="values"
            )
        ]
    _check_inputs(guard, model, USER)
    assert max(len(s) for s in snapshots) < full_length(STEPS) // 4
    assert snapshots[-1][0].text == USER

    with SqliteSaver.from_conn_string(path) as saver:
        model2 = ScriptedToolModel(steps=4, profile=PROFILE)
        agent2 = _agent(guard, model2, saver, persist=True, model=model2)
        restored = agent2.get_state(_config("p")).values["messages"]
        assert [m.id for m in restored] == [m.id for m in snapshots[-1]]
        out = agent2.invoke({"messages": [("user", "Now the tests.")]}, _config("p"))
    _check_inputs(guard, model2, "Now the tests.")
    assert f"Done after {STEPS} reads." in [m.text for m in model2.received[0]]
    assert out["messages"][-1].text == "Done after 4 reads."


def test_persist_keeps_the_reply_that_tuned_the_conversation(
    guard: ContextGuard,
) -> None:
    """A person's reply after an answer stays in the stored history it writes."""
    saver = InMemorySaver()
    first = ScriptedToolModel(steps=3, profile=PROFILE)
    _agent(guard, first, saver, persist=True, model=first).invoke(
        {"messages": [("user", USER)]}, _config("r")
    )
    model = ScriptedToolModel(steps=30, profile=PROFILE)
    agent = _agent(guard, model, saver, persist=True, model=model)
    stored = agent.invoke({"messages": [("user", "Now the tests.")]}, _config("r"))[
        "messages"
    ]
    at = next(i for i, m in enumerate(stored) if m.text == "Now the tests.")
    assert stored[at - 1].text == "Done after 3 reads."
    assert holds_reply(stored)
    _check_inputs(guard, model, "Now the tests.")
    assert any("output cleared by context guard" in m.text for m in stored)


async def test_async_agent_on_async_sqlite_streams_guard_events(
    guard: ContextGuard, tmp_path: Path
) -> None:
    model = ScriptedToolModel(steps=STEPS, profile=PROFILE)
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "a.sqlite")) as saver:
        agent = _agent(guard, model, saver, persist=True, model=model)
        custom = [
            e
            async for e in agent.astream_events(
                {"messages": [("user", USER)]}, _config("a"), version="v2"
            )
            if e["event"] == "on_custom_event"
        ]
        state = await agent.aget_state(_config("a"))
    _check_inputs(guard, model, USER)
    sources = {e["data"]["source"] for e in custom if e["name"] == REPORT_EVENT}
    assert sources == {"middleware", "middleware.before_model"}
    assert any(e["name"] == EVENT_EVENT for e in custom)
    assert len(state.values["messages"]) < full_length(STEPS) // 4


class Findings(BaseModel):
    """What the agent found, one finding per field."""

    bug: str = Field(description="The failing behaviour, in the user's words.")
    cause: str = Field(description="The file, function and line that cause it.")
    evidence: str = Field(description="The tool output that shows the cause.")
    fix: str = Field(description="The smallest change that fixes it, as a diff.")
    risks: str = Field(description="What else the fix could break, and why not.")
    tests: str = Field(description="The tests that cover the fix, new or old.")


def _findings_args(k: int) -> dict[str, Any]:
    return {name: f"finding {k}" for name in Findings.model_fields}


def test_structured_output_tools_count_against_the_budget() -> None:
    history = tool_history(
        3, lambda k: f"chunk {k}: " + "x = 1\n" * 15, system=SYSTEM, tool="read_chunk"
    )[1:]
    sent = [SystemMessage(SYSTEM), *history]
    probe = ContextGuard(GuardPolicy(context_window=200_000))
    base = probe.count_tokens(sent, tools=TOOLS)

    def run(response_format: Any, window: int) -> tuple[ScriptedToolModel, Any]:
        policy = GuardPolicy(
            context_window=window,
            reserve_tokens=RESERVE,
            hard_min_tokens=0,
            warn_below_tokens=0,
            max_tool_result_share=0.5,  # results are pruned, not cut
        )
        model = ScriptedToolModel(
            steps=1 if response_format else 0,
            tool_name="Findings",
            args=_findings_args,
        )
        agent = create_agent(
            model,
            TOOLS,
            system_prompt=SYSTEM,
            middleware=[ContextGuardMiddleware(ContextGuard(policy))],
            response_format=response_format,
        )
        recorder = _Reports()
        out = agent.invoke({"messages": history}, {"callbacks": [recorder]})
        if response_format:
            assert out["structured_response"] == Findings(**_findings_args(0))
        return model, recorder.reports[0]

    model, report = run(ToolStrategy(Findings), 200_000)
    assert [t.name for t in model.bound_tools] == ["read_chunk", "Findings"]
    schema = probe.counter.count_tools(model.bound_tools[1:])
    assert schema > base // 3
    assert report["tokens_before"] == base + schema
    assert len(model.received[0]) == len(sent)

    # Room for the history with some to spare, but not for the schema as well.
    window = RESERVE + base + schema // 2
    model, report = run(None, window)
    assert report["tokens_before"] == base
    assert len(model.received[0]) == len(sent)
    model, report = run(ToolStrategy(Findings), window)
    assert report["tokens_before"] == base + schema > report["budget"]
    assert report["tokens_after"] <= report["budget"]
    assert len(model.received[0]) < len(sent)


def _request(**kw: Any) -> ModelRequest[Any]:
    model = ScriptedToolModel(steps=0, profile=PROFILE)
    return ModelRequest(model=model, messages=long_history(30)[1:], **kw)


def test_system_message_stays_separate_and_tools_count() -> None:
    guard = ContextGuard(  # each call fitted to its own budget, not reused
        GuardPolicy(
            reserve_tokens=RESERVE,
            warn_below_tokens=16_000,
            stable_prefix=False,
            digest=False,
            max_tool_result_share=0.5,  # results are pruned, not cut
        )
    )
    seen: list[ModelRequest[Any]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    middleware = ContextGuardMiddleware(guard)
    for tools in ([], [BIG_TOOL]):
        request = _request(system_prompt=SYSTEM, tools=tools)
        middleware.wrap_model_call(request, handler)
        sent = seen[-1]
        assert sent.system_message is not None
        assert sent.system_message.text == SYSTEM
        assert sent.tools == tools
        full: list[BaseMessage] = [sent.system_message, *sent.messages]
        assert guard.count_tokens(full, tools=tools) <= BUDGET
    assert len(seen[1].messages) < len(seen[0].messages)


async def test_unchanged_request_is_passed_through(guard: ContextGuard) -> None:
    request = ModelRequest(
        model=ScriptedToolModel(steps=0, profile=PROFILE),
        messages=long_history(1)[1:],
        system_prompt=SYSTEM,
    )
    seen: list[ModelRequest[Any]] = []

    async def handler(req: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(req)
        return ModelResponse(result=[AIMessage("ok")])

    await ContextGuardMiddleware(guard).awrap_model_call(request, handler)
    assert seen == [request]
    assert seen[0] is request


def test_state_is_left_alone_without_persist(guard: ContextGuard) -> None:
    middleware = ContextGuardMiddleware(guard)
    state: Any = {"messages": long_history(30)}
    assert middleware.before_model(state, None) is None  # type: ignore[arg-type]


def test_import_without_langchain_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    monkeypatch.delitem(sys.modules, "langchain_context_guard.adapters._middleware")
    expected = re.escape('pip install "langchain-context-guard[agents]"')
    with pytest.raises(ImportError, match=expected):
        importlib.import_module("langchain_context_guard.adapters._middleware")


def test_an_agent_run_keeps_its_prompt_prefix_between_prunings(tmp_path: Path) -> None:
    """Each model call starts with what the previous one was sent, but prunings.

    The default ``stable_prefix`` at work in a real agent with a checkpointer.
    """
    guard = ContextGuard(_policy())
    model = ScriptedToolModel(steps=40, profile={"max_input_tokens": WINDOW})
    with SqliteSaver.from_conn_string(str(tmp_path / "agent.sqlite")) as saver:
        agent = create_agent(
            model,
            TOOLS,
            system_prompt=SYSTEM,
            middleware=[ContextGuardMiddleware(guard)],
            checkpointer=saver,
        )
        config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
        agent.invoke({"messages": [("user", "Task: read the chunks.")]}, config)
    received = model.received
    assert len(received) == 41
    kept = 0
    for before, now in itertools.pairwise(received):
        check_model_input(guard, now, user_text="Task: read the chunks.", tools=TOOLS)
        kept += now[: len(before)] == before
    pruned = len(received) - 1 - kept
    assert guard.count_tokens(received[-1]) <= WINDOW - RESERVE
    # 40 results of 5-15k tokens each in a 17k budget: a pruning every 2-3 steps
    # (they grow the history so fast that the cost model prunes deep, prune_share)
    # is needed, and the steps in between re-send the previous prompt whole
    assert 8 <= pruned <= 20
    assert kept >= 20


def test_a_pruning_agent_logs_no_warnings(
    guard: ContextGuard, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedToolModel(steps=40, profile=PROFILE)
    agent = _agent(guard, model, InMemorySaver())
    with caplog.at_level(logging.INFO, logger="langchain_context_guard"):
        agent.invoke({"messages": [("user", USER)]}, _config("quiet"))
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(model.received) == 41
    assert max(len(r) for r in model.received) < full_length(40)  # it pruned
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert 0 < len(infos) <= len(model.received)  # one line per call at most
    assert all(r.getMessage().startswith("Context guard (middleware") for r in infos)


def test_a_small_window_is_warned_about_once_per_guard_and_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = ContextGuard(GuardPolicy(reserve_tokens=2_000))  # warns below 32k
    model = ScriptedToolModel(steps=12, profile={"max_input_tokens": 16_000})
    agent = _agent(guard, model, InMemorySaver())
    with caplog.at_level(logging.DEBUG, logger="langchain_context_guard"):
        agent.invoke({"messages": [("user", USER)]}, _config("w1"))
        agent.invoke({"messages": [("user", "again")]}, _config("w2"))
    warnings = [r for r in caplog.records if "below the recommended" in r.getMessage()]
    assert len(model.received) == 2 * 13
    assert len(warnings) == 1


def _interactive_run(policy: GuardPolicy, path: Path) -> tuple[list[Any], list[Any]]:
    """A task, the answer, a person's reply and the work it asks for, on SQLite.

    Returns what the model received, and the guard's reports, turn by turn.
    """
    guard = ContextGuard(policy)
    received, reports = [], []
    with SqliteSaver.from_conn_string(str(path)) as saver:
        for user in (USER, "Now the tests, please."):
            model = ScriptedToolModel(steps=12, profile=PROFILE)
            recorder = _Reports()
            agent = _agent(guard, model, saver)
            agent.invoke(
                {"messages": [("user", user)]}, _config("i", callbacks=[recorder])
            )
            for sent in model.received:
                check_model_input(guard, sent, user_text=user, tools=TOOLS)
            received.append(model.received)
            reports.append(recorder.reports)
    return received, reports


def _shapes(calls: list[Any]) -> list[Any]:
    """What each call received, but the message ids (new on each run)."""
    return [
        [
            (m.type, m.content, getattr(m, "tool_calls", None), m.additional_kwargs)
            for m in sent
        ]
        for sent in calls
    ]


def test_an_agent_a_person_replies_to_takes_the_interactive_settings(
    tmp_path: Path,
) -> None:
    """``interactive_tuning``: the task's run is sent as without it; once the
    person replies to the answer, the guard prunes with the turns digest."""
    base = {"reserve_tokens": RESERVE, "max_tool_result_share": 0.5}
    plain, _ = _interactive_run(GuardPolicy(**base), tmp_path / "plain.sqlite")
    tuned, reports = _interactive_run(
        GuardPolicy(**base, interactive_tuning=True), tmp_path / "tuned.sqlite"
    )
    assert _shapes(tuned[0]) == _shapes(plain[0])  # the task: nothing to tune yet
    before = {e["kind"] for r in reports[0] for e in r["events"]}
    after = {e["kind"] for r in reports[1] for e in r["events"]}
    assert "trim" in before and "digest" not in before
    assert "digest" in after  # the reply's work is pruned with the turns
