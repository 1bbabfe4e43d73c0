"""Scripted summarizers, histories and a small ReAct graph for compaction tests."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.graph import END, StateGraph
from langgraph.graph.message import add_messages
from pydantic import Field, PrivateAttr
from typing_extensions import TypedDict

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.compaction import (
    CompactionSettings,
    Compactor,
    add_compaction,
)
from tests.fakes import (
    ScriptedChatModel,
    ScriptedToolModel,
    agent_loop,
    tool_history,
    tool_step,
)

WINDOW = 20_000
RESERVE = 2_000
TASK = "Fix the failing test in src/app.py; do not touch the public API."
SUMMARY_TEXT = """<completed>
- read src/app.py and found the off-by-one in handler()
</completed>
<remaining>
- patch handler() and rerun the tests
</remaining>
<current_state>
- tests: 1 failing (test_handler)
</current_state>
<files>
- src/app.py: read
</files>
<notes>
- none
</notes>"""


def make_guard(window: int = WINDOW, reserve: int = RESERVE) -> ContextGuard:
    """A guard with a small window and no window-size warnings."""
    return ContextGuard(
        GuardPolicy(
            context_window=window,
            reserve_tokens=reserve,
            hard_min_tokens=0,
            warn_below_tokens=0,
        )
    )


def tool_output(k: int, chars: int) -> str:
    """A deterministic tool output of about ``chars`` characters."""
    line = f"{k:04d}: def handler_{k}(request): return compute(request, {k})\n"
    return (line * (chars // len(line) + 1))[:chars]


def step(k: int, chars: int = 2_000, parallel: int = 1) -> list[BaseMessage]:
    """One assistant message calling ``parallel`` read_file tools, and the results."""
    return tool_step(k, tool_output(k, chars), parallel=parallel)


def agent_history(
    steps: int, chars: int = 2_000, *, parallel_every: int = 0
) -> list[BaseMessage]:
    """System prompt, the task, then ``steps`` tool steps (some parallel)."""
    return tool_history(
        steps,
        lambda k: tool_output(k, chars),
        task=TASK,
        parallel_every=parallel_every,
    )


def chat_history(
    turns: int, steps_per_turn: int, chars: int = 2_000
) -> list[BaseMessage]:
    """Several user turns, each answered by tool steps and a final reply."""
    out: list[BaseMessage] = [SystemMessage("You are a coding agent.", id="sys")]
    for t in range(turns):
        out.append(HumanMessage(f"Turn {t}: {TASK}", id=f"user-{t}"))
        for s in range(steps_per_turn):
            out += step(t * 100 + s, chars)
        out.append(AIMessage(f"Done with turn {t}.", id=f"reply-{t}"))
    return out


class ScriptedSummarizer(ScriptedChatModel):
    """Answers every call with the next scripted text (the last one repeats)."""

    responses: list[str] = Field(default_factory=lambda: [SUMMARY_TEXT])

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        return AIMessage(
            self.responses[min(len(self.received), len(self.responses)) - 1]
        )


class StructuredSummarizer(ScriptedSummarizer):
    """Supports ``with_structured_output``: answers with a SummarySections call."""

    sections: dict[str, list[str]] = Field(default_factory=dict)
    fail_structured: bool = False

    def bind_tools(self, tools: Any, **kwargs: Any) -> Runnable[Any, Any]:
        return self.bind(structured=True)

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        if not kwargs.get("structured"):
            return super().reply(messages)
        if self.fail_structured:
            raise ValueError("provider rejected the schema")
        call = {"name": "SummarySections", "args": self.sections, "id": "s1"}
        return AIMessage("", tool_calls=[call])


class FailingSummarizer(ScriptedSummarizer):
    """Raises on every call."""

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        raise RuntimeError("summarizer is down (503)")


class HangingSummarizer(ScriptedSummarizer):
    """Blocks until ``release`` is set (sync) or forever until cancelled (async).

    ``started`` is set as soon as a call begins, so tests wait on events, not time.
    """

    _started: threading.Event = PrivateAttr(default_factory=threading.Event)
    _cancelled: threading.Event = PrivateAttr(default_factory=threading.Event)
    _release: threading.Event = PrivateAttr(default_factory=threading.Event)
    _async_release: asyncio.Event | None = PrivateAttr(default=None)

    @property
    def started(self) -> threading.Event:
        """Set when a call has begun."""
        return self._started

    @property
    def cancelled(self) -> threading.Event:
        """Set when an async call was cancelled while it waited."""
        return self._cancelled

    @property
    def release(self) -> threading.Event:
        """Set it to let the blocked sync call answer."""
        return self._release

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._started.set()
        self._release.wait(timeout=300)  # a failed test must not hang the suite
        return super()._generate(messages, stop, run_manager)

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._started.set()
        self._async_release = self._async_release or asyncio.Event()
        try:
            await self._async_release.wait()
        except asyncio.CancelledError:
            self._cancelled.set()
            raise
        return super()._generate(messages, stop)

    def release_async(self) -> None:
        """Let a blocked async call answer, now or when it starts (loop's thread)."""
        self._async_release = self._async_release or asyncio.Event()
        self._async_release.set()


class State(TypedDict):
    """Graph state: the messages and a step counter."""

    messages: Annotated[list[BaseMessage], add_messages]
    step: int


class Agent:
    """A scripted agent node: ``steps`` tool calls, then a final answer.

    Like a real model node it sends ``guard.prepare(state)``; it records the token
    count of every input it sent, so tests can check each call fit the budget.
    """

    def __init__(
        self, guard: ContextGuard, steps: int, model: BaseChatModel | None = None
    ) -> None:
        self.guard = guard
        self.steps = steps
        self.model = model
        self.sent: list[int] = []

    def __call__(self, state: State) -> dict[str, Any]:
        prepared = self.guard.prepare(state["messages"])
        self.sent.append(prepared.report.tokens_after)
        k = state.get("step", 0)
        if k >= self.steps:
            reply = self.model.invoke(prepared.messages) if self.model else None
            final = reply if reply is not None else AIMessage("All done.")
            return {"messages": [final]}
        call = {"name": "read_file", "args": {"path": f"src/f{k}.py"}, "id": f"c{k}"}
        return {"messages": [AIMessage("", tool_calls=[call], id=f"ai-{k}")]}


def build_graph(
    compactor: Compactor,
    agent: Agent,
    *,
    chars: int = 2_000,
    big_every: int = 0,
) -> StateGraph[Any]:
    """START -> agent -> tools -> agent ... with compaction before the agent."""

    def tools(state: State) -> dict[str, Any]:
        k = state.get("step", 0)
        size = chars * 8 if big_every and k % big_every == 0 else chars
        result = ToolMessage(
            tool_output(k, size), tool_call_id=f"c{k}", name="read_file", id=f"t-{k}"
        )
        return {"messages": [result], "step": k + 1}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = agent_loop(State, agent, tools, route)
    add_compaction(builder, before="agent", compactor=compactor)
    return builder


def start(task: str = TASK) -> dict[str, Any]:
    """The input of a run."""
    return {
        "messages": [
            SystemMessage("You are a coding agent.", id="sys"),
            HumanMessage(task, id="task"),
        ],
        "step": 0,
    }


def settings(**overrides: Any) -> CompactionSettings:
    """Test settings: no retry delay, small keep."""
    values: dict[str, Any] = {"keep": ("tokens", 3_000), "retry_delay": 0.0}
    values.update(overrides)
    return CompactionSettings(**values)


def tool_calling_model(steps: int = 10) -> ScriptedToolModel:
    """A tool-calling agent model: ``steps`` read_file calls, then "All done."."""
    return ScriptedToolModel(
        steps=steps,
        tool_name="read_file",
        args=lambda k: {"path": f"src/f{k}.py"},
        answer="All done.",
        per_turn=False,
    )


@tool
def read_file(path: str) -> str:
    """Read a file of the repository."""
    return tool_output(int("".join(c for c in path if c.isdigit()) or 0), 4_000)
