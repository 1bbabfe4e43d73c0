"""``background_at``: the summary prepared before the trigger and swapped in there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_context_guard import ConfigError, GuardEvent
from langchain_context_guard.compaction import CompactionMiddleware, Compactor
from langchain_context_guard.engine._messages import is_summary
from tests.compaction._support import (
    Agent,
    HangingSummarizer,
    ScriptedSummarizer,
    agent_history,
    build_graph,
    make_guard,
    read_file,
    settings,
    start,
    tool_calling_model,
)
from tests.fakes import pairing_errors

GUARD = make_guard()
TRIGGER = 12_000
THREAD = "t-1"


class FailOnce(ScriptedSummarizer):
    """Fails its first call (the one made in the background), then answers."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        if len(self.received) == 1:
            raise RuntimeError("summarizer is down (503)")
        return super().reply(messages, **kwargs)


def _compactor(
    summarizer: ScriptedSummarizer, events: list[GuardEvent] | None = None
) -> Compactor:
    config = settings(trigger=("tokens", TRIGGER), background_at=0.6, retries=0)
    sink = events.append if events is not None else None
    return Compactor(summarizer, config, guard=GUARD, on_event=sink)


def _histories(comp: Compactor) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A history past ``background_at`` but under the trigger; then one over it."""
    steps = 2
    while comp.tokens(agent_history(steps)) < 0.6 * TRIGGER:
        steps += 1
    early = agent_history(steps)
    assert comp.tokens(early) < TRIGGER
    while comp.tokens(agent_history(steps)) < TRIGGER:
        steps += 1
    late = agent_history(steps)
    assert late[: len(early)] == early  # the same conversation, grown
    return early, late


def _wait(comp: Compactor) -> None:
    prepared = comp._background.get(THREAD)
    assert prepared is not None
    prepared.job.exception(timeout=30)  # type: ignore[call-arg, union-attr]


def test_the_prepared_summary_is_used_at_the_trigger_with_no_call_there() -> None:
    events: list[GuardEvent] = []
    summarizer = ScriptedSummarizer()
    comp = _compactor(summarizer, events)
    early, late = _histories(comp)
    assert comp.update(early, thread_id=THREAD) is None  # under the trigger
    _wait(comp)
    assert len(summarizer.received) == 1  # started early, off the critical path
    prepared = comp._background.get(THREAD)
    assert prepared is not None
    summarised = [m.id for m in prepared.plan.history]

    update = comp.update(late, thread_id=THREAD)
    assert update is not None
    assert len(summarizer.received) == 1  # no summary call at the trigger
    out = update["messages"][1:]  # after RemoveMessage
    assert is_summary(out[1])
    # Everything after the summarised prefix is kept verbatim, as the state has it.
    kept = late[1 + len(summarised) :]
    assert out[2:] == kept
    assert pairing_errors(out) == []
    assert "prepared in the background" in events[-1].detail


async def test_async_hosts_prepare_it_in_a_task() -> None:
    summarizer = ScriptedSummarizer()
    comp = _compactor(summarizer)
    early, late = _histories(comp)
    assert await comp.aupdate(early, thread_id=THREAD) is None
    prepared = comp._background.get(THREAD)
    assert prepared is not None and isinstance(prepared.job, asyncio.Task)
    update = await comp.aupdate(late, thread_id=THREAD)
    assert update is not None and is_summary(update["messages"][2])
    assert len(summarizer.received) == 1  # awaited the task, asked nothing more


def test_a_history_that_changed_under_it_is_summarised_in_the_foreground() -> None:
    events: list[GuardEvent] = []
    summarizer = ScriptedSummarizer()
    comp = _compactor(summarizer, events)
    early, late = _histories(comp)
    comp.update(early, thread_id=THREAD)
    _wait(comp)
    edited = [late[0], HumanMessage("A new task.", id="task-2"), *late[2:]]
    update = comp.update(edited, thread_id=THREAD)
    assert update is not None
    assert len(summarizer.received) == 2  # the prepared one no longer applied
    assert "background" not in events[-1].detail


def test_a_failed_background_summary_changes_nothing() -> None:
    events: list[GuardEvent] = []
    summarizer = FailOnce()
    comp = _compactor(summarizer, events)
    early, late = _histories(comp)
    original = list(early)
    assert comp.update(early, thread_id=THREAD) is None
    _wait(comp)
    assert early == original and not events  # no state change, no event
    update = comp.update(late, thread_id=THREAD)
    assert update is not None  # summarised in the foreground instead
    assert len(summarizer.received) == 2
    assert "background" not in events[-1].detail


def test_without_background_at_nothing_starts_early() -> None:
    summarizer = ScriptedSummarizer()
    comp = Compactor(summarizer, settings(trigger=("tokens", TRIGGER)), guard=GUARD)
    early, _ = _histories(comp)
    comp.update(early, thread_id=THREAD)
    assert comp._background.get(THREAD) is None and not summarizer.received


def test_in_a_graph_every_summary_is_prepared_in_the_background() -> None:
    events: list[GuardEvent] = []
    summarizer = ScriptedSummarizer()
    comp = _compactor(summarizer, events)
    graph = build_graph(comp, Agent(GUARD, steps=40)).compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 500}
    graph.invoke(start(), config)
    done = [e for e in events if e.kind == "compaction"]
    assert done and all("prepared in the background" in e.detail for e in done)
    assert len(summarizer.received) >= len(done)


@pytest.mark.parametrize("value", [0, 1, 1.5, -0.2])
def test_background_at_is_a_share_below_the_trigger(value: float) -> None:
    with pytest.raises(ConfigError, match="background_at"):
        settings(background_at=value)


@pytest.mark.parametrize("run", ["sync", "async"])
async def test_under_create_agent_the_summary_is_prepared_early(run: str) -> None:
    events: list[GuardEvent] = []
    summarizer = ScriptedSummarizer()
    mw = CompactionMiddleware(
        tool_calling_model(steps=40),
        summarizer=summarizer,
        guard=GUARD,
        trigger=("tokens", TRIGGER),
        background_at=0.6,
        retry_delay=0.0,
    )
    mw.compactor.on_event = events.append
    agent = create_agent(
        tool_calling_model(steps=40),
        [read_file],
        middleware=[mw],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": THREAD}, "recursion_limit": 500}
    task = {"messages": [("user", "Read the files.")]}
    if run == "async":
        await agent.ainvoke(task, config)
    else:
        await asyncio.to_thread(agent.invoke, task, config)
    done = [e for e in events if e.kind == "compaction"]
    assert done and all("prepared in the background" in e.detail for e in done)


async def test_cancelling_the_call_that_waits_for_it_is_not_swallowed() -> None:
    summarizer = HangingSummarizer()
    comp = _compactor(summarizer)
    early, late = _histories(comp)
    await comp.aupdate(early, thread_id=THREAD)
    prepared = comp._background.get(THREAD)
    assert prepared is not None and isinstance(prepared.job, asyncio.Task)
    call = asyncio.ensure_future(comp.aupdate(late, thread_id=THREAD))
    await asyncio.sleep(0)  # the call now waits for the prepared summary
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    summarizer.release_async()
    summary = await prepared.job  # the job itself was not cancelled
    assert summary.completed
