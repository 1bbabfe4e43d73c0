"""``summary_mode="append"``: the summary call reads the agent's prompt as sent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_context_guard import GuardEvent
from langchain_context_guard.compaction import Compactor, SerializedSummaryWarning
from langchain_context_guard.compaction._calls import SENT_PREFIX, SentPrefix
from langchain_context_guard.compaction._middleware import CompactionMiddleware
from langchain_context_guard.compaction._plan import CompactionPlan
from langchain_context_guard.compaction._summary_prompt import append_prompt
from langchain_context_guard.engine._messages import marker
from tests.compaction._support import (
    TASK,
    ScriptedSummarizer,
    agent_history,
    make_guard,
    read_file,
    settings,
    tool_calling_model,
)
from tests.providers._support import violations

WINDOW = 30_000
SYSTEM = "You are a careful coding agent."


class ToolAwareSummarizer(ScriptedSummarizer):
    """Records the tools it is bound to, and every input (``received``)."""

    bound: list[list[Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolAwareSummarizer:
        self.bound.append(list(tools))
        return self


def _run(mode: str) -> tuple[Any, ToolAwareSummarizer, list[list[BaseMessage]]]:
    summarizer = ToolAwareSummarizer()
    mw = CompactionMiddleware(
        summarizer=summarizer,
        model=tool_calling_model(0),
        trigger=("fraction", 0.8),
        keep=("messages", 10),
        retry_delay=0.0,
        summary_mode=mode,
    )
    agent_model = tool_calling_model(steps=30)
    agent_model.profile = {"max_input_tokens": WINDOW}
    mw.model.profile = {"max_input_tokens": WINDOW}
    agent = create_agent(
        agent_model,
        [read_file],
        system_prompt=SYSTEM,
        middleware=[mw],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 300}
    states = [
        s["messages"]
        for s in agent.stream(
            {"messages": [("user", TASK)]}, config, stream_mode="values"
        )
    ]
    assert states[-1][-1].content == "All done."
    return agent_model, summarizer, states


def test_the_summary_call_is_the_last_prompt_plus_one_instruction():
    agent_model, summarizer, states = _run("append")
    assert summarizer.received, "the summarizer was never asked"
    prompt = summarizer.received[0]
    # The agent's last call before it, byte for byte (the provider's cached
    # prefix), then the reply and the tool result since, then the instruction.
    prefixes = [r for r in agent_model.received if prompt[: len(r)] == r]
    assert prefixes and max(map(len, prefixes)) == len(prompt) - 3
    assert isinstance(prompt[0], SystemMessage) and prompt[0].content == SYSTEM
    assert isinstance(prompt[-1], HumanMessage) and "<completed>" in prompt[-1].text
    assert [getattr(t, "name", None) for t in summarizer.bound[-1]] == ["read_file"]
    summaries = [
        m for s in states for m in s if (marker(m) or {}).get("kind") == "summary"
    ]
    assert summaries and "off-by-one" in summaries[0].text  # parsed into sections


def test_the_serialized_mode_sends_a_prompt_of_its_own():
    _, summarizer, _ = _run("serialize")
    prompt = summarizer.received[0]
    assert len(prompt) == 2 and "<conversation>" in prompt[1].text
    assert all(
        getattr(t, "name", None) != "read_file" for b in summarizer.bound for t in b
    )


def test_outside_an_agent_the_state_is_sent_as_it_is_then_the_instruction():
    history = agent_history(6)
    plan = CompactionPlan(
        system=(history[0],),
        previous=None,
        history=tuple(history[1:8]),
        turn_prefix=(),
        kept=tuple(history[8:]),
    )
    prompt = append_prompt(plan, system=SystemMessage("ignored: the state has one"))
    assert all(a is b for a, b in zip(prompt, history, strict=False))
    assert len(prompt) == len(history) + 1
    assert f"last {len(history) - 8} message(s)" in prompt[-1].text


def test_the_summary_call_starts_with_the_prompt_the_guard_sends():
    # The guard cuts each huge result: the prompt it sends is what the provider
    # caches, so the summary call asks from it rather than from the state.
    history = agent_history(8, chars=30_000)
    summarizer = ScriptedSummarizer()
    compactor = Compactor(
        summarizer, settings(summary_mode="append"), guard=make_guard()
    )
    compactor.compact(history)
    sent = make_guard().prepare(history).messages
    assert sent != history  # the guard cut something
    prompt = summarizer.received[0]
    assert prompt[:-1] == sent
    assert "<completed>" in prompt[-1].text


def test_an_agent_that_sent_the_state_unchanged_is_asked_from_the_state():
    history = agent_history(8, chars=30_000)
    summarizer = ScriptedSummarizer()
    compactor = Compactor(
        summarizer, settings(summary_mode="append"), guard=make_guard()
    )
    token = SENT_PREFIX.set(SentPrefix(prepared=False))
    try:
        compactor.compact(history)
    finally:
        SENT_PREFIX.reset(token)
    assert summarizer.received[0][:-1] == history


class SmallWindowSummarizer(ScriptedSummarizer):
    """Refuses, as Anthropic words it, any prompt of more than 20,000 characters."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> Any:
        size = sum(len(m.text) for m in messages)
        if size > 20_000:
            raise ValueError(f"prompt is too long: {size} tokens > 20000 maximum")
        return super().reply(messages, **kwargs)


def test_an_appended_prompt_that_overflows_is_retried_serialised_and_cut():
    history = agent_history(8, chars=6_000)
    summarizer = SmallWindowSummarizer()
    settings_ = settings(summary_mode="append", retries=0)
    Compactor(summarizer, settings_, guard=make_guard()).compact(history)
    first, second = summarizer.received
    assert "<completed>" in first[-1].text and len(first) > 2  # appended
    assert len(second) == 2 and "<conversation>" in second[1].text  # serialised
    assert "characters truncated" in second[1].text


# -- what is accepted as a summary ------------------------------------------------


class ToolCallingSummarizer(ScriptedSummarizer):
    """Answers the summary request as a turn of the task: a preamble and a call."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        call = {"name": "read_file", "args": {"path": "src/app.py"}, "id": "x1"}
        return AIMessage("Let me read the file first.", tool_calls=[call])


def _refused(summarizer: ScriptedSummarizer) -> list[GuardEvent]:
    """The events of a due compaction whose summary was refused."""
    events: list[GuardEvent] = []
    compactor = Compactor(
        summarizer,
        settings(summary_mode="append"),
        guard=make_guard(),
        on_event=events.append,
    )
    assert compactor.update(agent_history(40)) is None
    return events


@pytest.mark.parametrize(
    ("summarizer", "why"),
    [
        pytest.param(ToolCallingSummarizer(), "calls a tool (read_file)", id="tool"),
        pytest.param(
            ScriptedSummarizer(responses=["I will patch handler() next."]),
            "none of the summary's sections",
            id="loose-text",
        ),
    ],
)
def test_an_answer_that_is_not_a_summary_leaves_the_history_unchanged(
    summarizer: ScriptedSummarizer, why: str
) -> None:
    events = _refused(summarizer)
    assert [e.kind for e in events] == ["compaction_failed"]
    assert events[0].detail.startswith("not_a_summary:")
    assert why in events[0].detail
    assert len(summarizer.received) == 1  # the same request is not retried


def test_a_serialised_summary_may_be_loose_text():
    summarizer = ScriptedSummarizer(responses=["Read src/app.py; patch next."])
    compactor = Compactor(summarizer, settings(), guard=make_guard())
    result = compactor.compact(agent_history(40))
    assert result.summary.notes == ("Read src/app.py; patch next.",)


# -- one slot per conversation --------------------------------------------------


def _agent(mw: CompactionMiddleware, system: str, checkpointer: Any = None) -> Any:
    agent_model = tool_calling_model(steps=30)
    agent_model.profile = {"max_input_tokens": WINDOW}
    return create_agent(
        agent_model,
        [read_file],
        system_prompt=system,
        middleware=[mw],
        checkpointer=checkpointer,
    )


def test_without_a_thread_id_the_summary_is_serialised_and_never_shared():
    summarizer = ToolAwareSummarizer()
    mw = CompactionMiddleware(
        summarizer=summarizer,
        model=tool_calling_model(0),
        trigger=("fraction", 0.8),
        keep=("messages", 10),
        retry_delay=0.0,
        summary_mode="append",
    )
    mw.model.profile = {"max_input_tokens": WINDOW}
    config: Any = {"recursion_limit": 300}
    with pytest.warns(SerializedSummaryWarning, match="without a thread id") as seen:
        _agent(mw, "SECRET-A: the launch code is 0000.").invoke(
            {"messages": [("user", TASK)]}, config
        )
        asked = len(summarizer.received)
        _agent(mw, SYSTEM).invoke({"messages": [("user", TASK)]}, config)
    assert 0 < asked < len(summarizer.received)
    assert len(seen) == 1  # said once
    for prompt in summarizer.received[asked:]:
        assert all("SECRET-A" not in m.text for m in prompt)
    assert all(
        len(p) == 2 and "<conversation>" in p[1].text for p in summarizer.received
    )
    bound = [getattr(t, "name", None) for b in summarizer.bound for t in b]
    assert "read_file" not in bound  # no agent's tools borrowed either


# -- a call still open ------------------------------------------------------------


def _later(messages: list[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with their message and call ids made their own (``-later``):
    call ids are unique in a real conversation (the Responses API pairs by them)."""
    out: list[BaseMessage] = []
    for m in messages:
        update: dict[str, Any] = {"id": f"{m.id}-later"}
        if isinstance(m, AIMessage):
            update["tool_calls"] = [
                {**c, "id": f"{c['id']}-later"} for c in m.tool_calls
            ]
        elif isinstance(m, ToolMessage):
            update["tool_call_id"] = f"{m.tool_call_id}-later"
        out.append(m.model_copy(update=update))
    return out


def _open(call_id: str) -> AIMessage:
    call = {"name": "read_file", "args": {"path": "src/big.py"}, "id": call_id}
    return AIMessage("Reading the big file.", tool_calls=[call], id=f"ai-{call_id}")


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([*agent_history(40), _open("open-1")], id="last-call-open"),
        pytest.param(
            [
                *agent_history(4),
                _open("open-1"),
                HumanMessage("Skip that file.", id="skip"),
                *_later(agent_history(36)[2:]),
            ],
            id="call-left-open-earlier",
        ),
    ],
)
def test_the_appended_request_is_valid_while_a_call_is_open(
    history: list[BaseMessage],
) -> None:
    summarizer = ScriptedSummarizer()
    token = SENT_PREFIX.set(SentPrefix(prepared=False))  # the state as it is
    try:
        Compactor(summarizer, settings(summary_mode="append")).compact(history)
    finally:
        SENT_PREFIX.reset(token)
    prompt = summarizer.received[0]
    assert "<completed>" in prompt[-1].text
    assert violations(prompt) == {}
    assert next(m for m in history if m.id == "ai-open-1") in prompt  # sent as is
