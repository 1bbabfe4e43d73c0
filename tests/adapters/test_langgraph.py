from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition
from langgraph.store.sqlite import SqliteStore
from typing_extensions import TypedDict

from langchain_context_guard import ConfigError, ContextGuard, InvalidInputError
from langchain_context_guard.adapters._callbacks import EVENT_EVENT, REPORT_EVENT
from langchain_context_guard.adapters._langgraph import guard_node, pre_model_hook
from langchain_context_guard.adapters._results import ResultArchive, read_result
from langchain_context_guard.engine import keys_in_ranges
from langchain_context_guard.engine._messages import holds_reply
from langchain_context_guard.engine.passes._digest import DIGEST_ID
from tests.adapters._support import (
    BUDGET,
    SYSTEM,
    TOOLS,
    check_model_input,
    full_length,
    make_guard,
    read_note,
)
from tests.fakes import ScriptedToolModel, pairing_errors

USER = "Read every chunk, then summarise the repository."
STEPS = 100


@pytest.fixture(scope="module")
def guard() -> ContextGuard:
    return make_guard()


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.sqlite"


@pytest.fixture
def sqlite_saver(sqlite_path: Path) -> Iterator[SqliteSaver]:
    with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
        yield saver


def _config(thread: str) -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 1_000}


def _ids(messages: list[BaseMessage]) -> list[str | None]:
    return [m.id for m in messages]


def _react(
    guard: ContextGuard, model: ScriptedToolModel, saver: Any, mode: Any = "llm_input"
) -> Any:
    hook = pre_model_hook(guard, mode=mode, tools=TOOLS, system_prompt=SYSTEM)
    return create_react_agent(
        model, TOOLS, prompt=SYSTEM, pre_model_hook=hook, checkpointer=saver
    )


def _check_inputs(guard: ContextGuard, model: ScriptedToolModel, user: str) -> None:
    for received in model.received:
        check_model_input(guard, received, user_text=user, tools=TOOLS)


def test_react_agent_llm_input_mode_never_changes_state(guard: ContextGuard) -> None:
    model = ScriptedToolModel(steps=STEPS)
    agent = _react(guard, model, InMemorySaver())
    snapshots = [
        s["messages"]
        for s in agent.stream(
            {"messages": [("user", USER)]}, _config("t"), stream_mode="values"
        )
    ]
    final = snapshots[-1]
    assert len(final) == full_length(STEPS)
    for state in snapshots:  # the stored history only ever grows
        assert _ids(state) == _ids(final)[: len(state)]
    assert len(model.received) == STEPS + 1
    _check_inputs(guard, model, USER)
    assert max(len(r) for r in model.received) < full_length(STEPS) // 4


def test_react_agent_persist_mode_shrinks_state_and_resumes(
    guard: ContextGuard, sqlite_path: Path, sqlite_saver: SqliteSaver
) -> None:
    model = ScriptedToolModel(steps=STEPS)
    agent = _react(guard, model, sqlite_saver, mode="persist")
    snapshots = [
        s["messages"]
        for s in agent.stream(
            {"messages": [("user", USER)]}, _config("t"), stream_mode="values"
        )
    ]
    assert len(model.received) == STEPS + 1
    _check_inputs(guard, model, USER)
    # The model saw exactly the stored history, behind the agent's prompt.
    stored = {tuple(_ids(s)) for s in snapshots}
    for received in model.received:
        assert tuple(_ids(received[1:])) in stored
    assert max(len(s) for s in snapshots) < full_length(STEPS) // 4
    assert snapshots[-1][-1].text == f"Done after {STEPS} reads."

    # A new process: new saver, new graph, same thread. The history continues.
    with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
        model2 = ScriptedToolModel(steps=3)
        agent2 = _react(guard, model2, saver, mode="persist")
        before = agent2.get_state(_config("t")).values["messages"]
        assert _ids(before) == _ids(snapshots[-1])
        out = agent2.invoke({"messages": [("user", "Now the tests.")]}, _config("t"))
    _check_inputs(guard, model2, "Now the tests.")
    first = model2.received[0]
    assert first[1].text == USER  # the task is kept
    assert f"Done after {STEPS} reads." in [m.text for m in first]
    assert out["messages"][-1].text == "Done after 3 reads."


def test_react_agent_resumes_on_sqlite_in_llm_input_mode(
    guard: ContextGuard, sqlite_path: Path, sqlite_saver: SqliteSaver
) -> None:
    model = ScriptedToolModel(steps=STEPS)
    agent = _react(guard, model, sqlite_saver)
    # One checkpoint at the end: the full history (about 4 MB) saved every step
    # would write a gigabyte for this test alone.
    agent.invoke({"messages": [("user", USER)]}, _config("t"), durability="exit")
    _check_inputs(guard, model, USER)

    with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
        model2 = ScriptedToolModel(steps=5)
        out = _react(guard, model2, saver).invoke(
            {"messages": [("user", "Now the tests.")]}, _config("t"), durability="exit"
        )
    assert len(out["messages"]) == full_length(STEPS) + full_length(5)
    assert len(model2.received) == 6
    _check_inputs(guard, model2, "Now the tests.")


async def test_react_agent_async_with_async_sqlite(
    guard: ContextGuard, sqlite_path: Path
) -> None:
    model = ScriptedToolModel(steps=STEPS)
    async with AsyncSqliteSaver.from_conn_string(str(sqlite_path)) as saver:
        agent = _react(guard, model, saver, mode="persist")
        out = await agent.ainvoke({"messages": [("user", USER)]}, _config("a"))
        state = await agent.aget_state(_config("a"))
    assert len(model.received) == STEPS + 1
    _check_inputs(guard, model, USER)
    assert _ids(state.values["messages"]) == _ids(out["messages"])
    assert len(out["messages"]) < full_length(STEPS) // 4


async def test_hook_events_show_in_astream_events(guard: ContextGuard) -> None:
    model = ScriptedToolModel(steps=12)
    agent = _react(guard, model, None)
    reports = [
        e
        async for e in agent.astream_events(
            {"messages": [("user", USER)]}, _config("e"), version="v2"
        )
        if e["event"] == "on_custom_event"
    ]
    names = [e["name"] for e in reports]
    assert names.count(REPORT_EVENT) == 13
    assert EVENT_EVENT in names
    last = [e["data"] for e in reports if e["name"] == REPORT_EVENT][-1]
    assert last["source"] == "pre_model_hook"
    assert last["tokens_after"] <= last["budget"] < last["tokens_before"]


def test_seed_004_self_check_hundred_turns_stay_stable(guard: ContextGuard) -> None:
    """100 user turns, each one tool call: every call in budget, nothing orphaned."""
    model = ScriptedToolModel(steps=1, tool_name="read_note")
    hook = pre_model_hook(guard, tools=[read_note], system_prompt=SYSTEM)
    agent = create_react_agent(model, [read_note], prompt=SYSTEM, pre_model_hook=hook)
    messages: list[Any] = []
    sizes: list[int] = []
    for turn in range(100):
        user = f"Turn {turn}: read the next note."
        out = agent.invoke({"messages": [*messages, ("user", user)]})
        messages = out["messages"]
        assert len(messages) == 4 * (turn + 1)  # the state keeps every turn
        for received in model.received[-2:]:
            check_model_input(guard, received, user_text=user, tools=[read_note])
            assert received[1].text == "Turn 0: read the next note."  # the task
            sizes.append(guard.count_tokens(received, tools=[read_note]))
    assert len(model.received) == 200
    assert guard.count_tokens(messages) > 4 * BUDGET  # pruning was needed
    late = sizes[100:]
    assert max(late) <= BUDGET
    # The window is used, not emptied: a pruning keeps prune_to (70%) of the
    # budget plus the digest, and the prompt then grows back to the budget.
    assert min(late) > BUDGET // 4
    assert max(late) > 0.8 * BUDGET


class History(TypedDict, total=False):
    history: Annotated[list[AnyMessage], add_messages]
    llm_input: list[AnyMessage]


def _hand_built(
    guard: ContextGuard, model: ScriptedToolModel, saver: Any, output_key: str | None
) -> Any:
    bound = model.bind_tools(TOOLS)

    def agent(state: History) -> History:
        sent = state["llm_input"] if output_key else state["history"]
        return {"history": [bound.invoke(sent)]}

    graph = StateGraph(History)
    graph.add_node(
        "guard",
        guard_node(guard, messages_key="history", output_key=output_key, tools=TOOLS),
    )
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS, messages_key="history"))
    graph.add_edge(START, "guard")
    graph.add_edge("guard", "agent")
    graph.add_conditional_edges(
        "agent", partial(tools_condition, messages_key="history")
    )
    graph.add_edge("tools", "guard")
    return graph.compile(checkpointer=saver)


@pytest.mark.parametrize(
    ("output_key", "saver_kind"),
    [
        pytest.param("llm_input", "memory", id="output-key-memory"),
        pytest.param(None, "sqlite", id="rewrite-sqlite"),
    ],
)
def test_hand_built_state_graph_with_custom_key(
    guard: ContextGuard, sqlite_path: Path, output_key: str | None, saver_kind: str
) -> None:
    model = ScriptedToolModel(steps=STEPS)
    start = {"history": [SystemMessage(SYSTEM), ("user", USER)]}
    with SqliteSaver.from_conn_string(str(sqlite_path)) as sqlite:
        saver = InMemorySaver() if saver_kind == "memory" else sqlite
        graph = _hand_built(guard, model, saver, output_key)
        # A full history (about 4 MB) is checkpointed once, at the end.
        durability = "exit" if output_key else "async"
        stream = graph.stream(
            start, _config("h"), stream_mode="values", durability=durability
        )
        snapshots = [s["history"] for s in stream]
        resumed = _hand_built(guard, ScriptedToolModel(steps=2), saver, output_key)
        out = resumed.invoke({"history": [("user", "And the docs?")]}, _config("h"))
    assert len(model.received) == STEPS + 1
    _check_inputs(guard, model, USER)
    final = snapshots[-1]
    if output_key:  # the history is untouched, the guarded copy is separate
        assert len(final) == full_length(STEPS) + 1
        assert len(out["history"]) == len(final) + full_length(2)
    else:  # the history itself was rewritten
        assert max(len(s) for s in snapshots) < full_length(STEPS) // 4
        assert pairing_errors(final) == []
    assert out["history"][-1].text == "Done after 2 reads."


def test_hook_rejects_unknown_mode_and_missing_key(guard: ContextGuard) -> None:
    with pytest.raises(ConfigError, match="mode"):
        pre_model_hook(guard, mode="rewrite")  # type: ignore[arg-type]
    node = guard_node(guard, messages_key="history")
    with pytest.raises(InvalidInputError, match="'history'"):
        node.invoke({"messages": []})


def test_unchanged_history_writes_nothing(guard: ContextGuard) -> None:
    short = [SystemMessage(SYSTEM), HumanMessage(USER, id="u")]
    assert guard_node(guard).invoke({"messages": short}) == {}
    assert pre_model_hook(guard, mode="persist").invoke({"messages": short}) == {}
    hook = pre_model_hook(guard, system_prompt=SYSTEM)
    [message] = hook.invoke({"messages": [("user", USER)]})["llm_input_messages"]
    assert message.text == USER


def _guarded_react(guard: ContextGuard, model: ScriptedToolModel, saver: Any) -> Any:
    from langchain_context_guard.adapters import GuardedAgentState

    hook = pre_model_hook(guard, tools=TOOLS, system_prompt=SYSTEM)
    return create_react_agent(
        model,
        TOOLS,
        prompt=SYSTEM,
        pre_model_hook=hook,
        checkpointer=saver,
        state_schema=GuardedAgentState,
    )


def test_hook_handover_records_stay_small_and_resume_the_prompt() -> None:
    from langchain_context_guard.engine.incremental._handover import STATE_KEY

    saver = InMemorySaver()
    first = _guarded_react(make_guard(), ScriptedToolModel(steps=40), saver)
    out = first.invoke({"messages": [("user", USER)]}, _config("h"))
    records = out[STATE_KEY]
    assert 1 <= len(records) <= 2  # the latest, and the one before its base
    assert all(len(str(record)) < 200 for record in records)
    # a restarted process (fresh guard) and the one that served the thread agree
    kept, served = make_guard(), InMemorySaver()
    _guarded_react(kept, ScriptedToolModel(steps=40), served).invoke(
        {"messages": [("user", USER)]}, _config("h")
    )
    again, same = ScriptedToolModel(steps=1), ScriptedToolModel(steps=1)
    _guarded_react(make_guard(), again, saver).invoke(
        {"messages": [("user", "Now the tests.")]}, _config("h")
    )
    _guarded_react(kept, same, served).invoke(
        {"messages": [("user", "Now the tests.")]}, _config("h")
    )
    assert [m.text for m in again.received[0]] == [m.text for m in same.received[0]]


async def test_hook_handover_async_keeps_the_records_too() -> None:
    from langchain_context_guard.engine.incremental._handover import STATE_KEY

    agent = _guarded_react(make_guard(), ScriptedToolModel(steps=20), InMemorySaver())
    out = await agent.ainvoke({"messages": [("user", USER)]}, _config("ha"))
    records = out[STATE_KEY]
    assert 1 <= len(records) <= 2
    assert records[-1][0] == len(out["messages"])  # the final reply's prompt


@pytest.mark.parametrize("value", ["hello", b"hi", HumanMessage("hi"), 42])
def test_hook_and_node_refuse_a_state_that_is_not_a_message_list(
    guard: ContextGuard, value: Any
) -> None:
    nodes = [pre_model_hook(guard), pre_model_hook(guard, mode="persist")]
    for node in [*nodes, guard_node(guard), guard_node(guard, output_key="out")]:
        with pytest.raises(InvalidInputError, match="Expected a sequence"):
            node.invoke({"messages": value})


def test_hook_refuses_an_openai_call_that_is_not_a_dict(guard: ContextGuard) -> None:
    bad = {"role": "assistant", "content": "", "tool_calls": ["x"]}
    with pytest.raises(InvalidInputError, match="tool_calls"):
        pre_model_hook(guard).invoke({"messages": [("user", "hi"), bad]})


def test_hook_ignores_junk_handover_records_in_the_state() -> None:
    from langchain_context_guard.engine.incremental._handover import STATE_KEY

    state: dict[str, Any] = {"messages": [SystemMessage(SYSTEM), HumanMessage(USER)]}
    clean = pre_model_hook(make_guard()).invoke(state)
    junk = [
        [2, {"ratio": float("inf"), "sent": [10**15, True]}],
        [True, {"base": 1}],
        [2.5, {}],
        ["x"],
        5,
        [[1], {}],
    ]
    out = pre_model_hook(make_guard()).invoke({**state, STATE_KEY: junk})
    assert out["llm_input_messages"] == clean["llm_input_messages"]
    assert out[STATE_KEY] == clean[STATE_KEY]  # the junk is not carried on


def test_persist_mode_stores_the_turns_digest_and_resumes(
    sqlite_path: Path, sqlite_saver: SqliteSaver
) -> None:
    guard = make_guard(digest=True, digest_form="turns")
    model = ScriptedToolModel(steps=40)
    agent = _react(guard, model, sqlite_saver, mode="persist")
    final = agent.invoke({"messages": [("user", USER)]}, _config("t"))["messages"]
    _check_inputs(guard, model, USER)
    cleared = [
        m for m in final if "output cleared by context guard" in m.text
    ]  # trimmed turns stored as their calls, each result one line
    assert cleared and len(final) == full_length(40)  # each turn kept, cut down
    assert sum(len(m.text) for m in final) < 10 * 20_000  # outputs are 20-60 KB
    assert pairing_errors(final) == []
    with SqliteSaver.from_conn_string(str(sqlite_path)) as saver:
        model2 = ScriptedToolModel(steps=3)
        agent2 = _react(guard, model2, saver, mode="persist")
        out = agent2.invoke({"messages": [("user", "Now the tests.")]}, _config("t"))
    _check_inputs(guard, model2, "Now the tests.")
    assert out["messages"][-1].text == "Done after 3 reads."


def test_persist_mode_keeps_the_reply_that_tuned_the_conversation(
    sqlite_saver: SqliteSaver,
) -> None:
    """A person's reply after an answer stays in the stored history it writes."""
    guard = make_guard()
    agent = _react(guard, ScriptedToolModel(steps=3), sqlite_saver, mode="persist")
    agent.invoke({"messages": [("user", USER)]}, _config("t"))
    model = ScriptedToolModel(steps=30)
    agent = _react(guard, model, sqlite_saver, mode="persist")
    final = agent.invoke({"messages": [("user", "Now the tests.")]}, _config("t"))
    stored = final["messages"]
    at = next(i for i, m in enumerate(stored) if m.text == "Now the tests.")
    assert stored[at - 1].text == "Done after 3 reads."
    assert holds_reply(stored)
    _check_inputs(guard, model, "Now the tests.")
    # The reply tuned the prunings: trimmed turns are kept as their calls.
    assert any("output cleared by context guard" in m.text for m in stored)
    assert pairing_errors(stored) == []


def test_persist_mode_with_an_archive_names_every_trimmed_result(
    sqlite_saver: SqliteSaver, sqlite_store: SqliteStore
) -> None:
    guard = make_guard(digest=True, digest_form="turns", digest_share=0.03)
    model = ScriptedToolModel(steps=40)
    hook = pre_model_hook(
        guard,
        mode="persist",
        tools=TOOLS,
        system_prompt=SYSTEM,
        archive=ResultArchive(sqlite_store),
    )
    agent = create_react_agent(
        model,
        TOOLS,
        prompt=SYSTEM,
        pre_model_hook=hook,
        checkpointer=sqlite_saver,
        store=sqlite_store,
    )
    final = agent.invoke({"messages": [("user", USER)]}, _config("t"))["messages"]
    assert pairing_errors(final) == []
    last = "\n".join(m.text for m in model.received[-1])
    found = re.search(r"Keys of all their archived outputs, oldest first: (.*)", last)
    assert found, "some trimmed turn did not fit: the note names its key"
    assert "output cleared by context guard" in last  # the newer ones, cut down
    first = keys_in_ranges(found.group(1))[0]
    original = read_result(sqlite_store, "t", f"#{first}", limit=10**6, unit="chars")
    assert "No archived result" not in original
    assert len(original) > 20_000  # the whole output, read back by its key
    notes = [m for m in final if m.id == DIGEST_ID]
    assert len(notes) <= 1  # the stored note is replaced, never doubled
