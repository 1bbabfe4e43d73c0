"""A scripted deep agent: one model playing the main agent, a sub-agent and the summary.

``DeepScript`` is langchain-core's fake chat model (``ScriptedChatModel``) with a
window in its profile (deepagents and the guard both read it). The main agent
writes its to-do list, then writes and reads back modules of log-like code and
hands one review to the general-purpose sub-agent through ``task``; the
sub-agent reads modules, then answers. Each call is told apart by the tools
bound (only the main agent has ``task``); deepagents' own summary call (its
summary prompt) gets a short summary that keeps the task, and
``SectionWriter`` writes ``CompactionMiddleware``'s. ``run`` builds the agent,
runs it and sorts every request the model received by who sent it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import Field, PrivateAttr

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard.adapters._deepagents import has_summarizer_hook
from tests.fakes import ScriptedChatModel

NEEDS_HOOK = pytest.mark.skipif(
    not has_summarizer_hook(),
    reason="guarded_summarization needs deepagents>=0.7.26 (its summarizer= hook)",
)

TASK = "Write the checksum modules, review them and fix what is wrong."
REVIEW = "Review the checksum modules written so far and list what looks wrong."
MAIN_STEPS = 54
SUB_STEPS = 12
TASK_AT = 30
LINES = 90
SECTIONS = """<completed>
- wrote and read back the checksum modules so far
</completed>
<remaining>
- finish the modules, review them, fix what is wrong
</remaining>
<current_state>
- modules under /src, review pending
</current_state>
<files>
- /src/mod_*.py: written
</files>
<notes>
- none
</notes>"""


def module(n: int) -> str:
    """Module ``n``'s source: dense, log-like lines (numbers, paths)."""
    return "\n".join(
        f"def check_{n}_{i}(v): return (v * {i * i + n}) % 65521  "
        f"# 2026-11-28T01:{i:02d}:{n:02d} src/mod_{n}.py:{i} crc={i * 7919 + n:08x}"
        for i in range(LINES)
    )


def _call(name: str, args: dict[str, Any], ident: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": ident}])


def main_step(n: int) -> AIMessage:
    """The main agent's call ``n``: to-dos, writes and reads, one ``task``."""
    ident = f"main_{n}"
    if n == 0:
        todos = [{"content": "write and review the modules", "status": "in_progress"}]
        return _call("write_todos", {"todos": todos}, ident)
    if n == TASK_AT:
        args = {"description": REVIEW, "subagent_type": "general-purpose"}
        return _call("task", args, ident)
    if n % 2:
        args = {"file_path": f"/src/mod_{n}.py", "content": module(n)}
        return _call("write_file", args, ident)
    return _call("read_file", {"file_path": f"/src/mod_{n - 1}.py"}, ident)


def sub_step(n: int) -> AIMessage:
    """The sub-agent's call ``n``: it reads the modules the main agent wrote."""
    path = f"/src/mod_{2 * (n % (TASK_AT // 2)) + 1}.py"
    return _call("read_file", {"file_path": path}, f"sub_{n}")


@dataclass(frozen=True)
class Request:
    """One model call: who made it, what it sent."""

    who: str
    messages: list[BaseMessage]
    tools: list[Any]


class DeepScript(ScriptedChatModel):
    """Main agent, sub-agent and summarizer in one scripted model."""

    bound: list[Any] = Field(default_factory=list)
    _turns: dict[str, int] = PrivateAttr(default_factory=dict)
    _requests: list[Request] = PrivateAttr(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> DeepScript:
        self.bound = list(tools)
        return self

    @property
    def requests(self) -> list[Request]:
        """Every call, in order."""
        return self._requests

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        names = {getattr(t, "name", None) for t in self.bound}
        if "<messages>" in messages[-1].text:  # deepagents' summary prompt
            self._requests.append(Request("summary", list(messages), []))
            return AIMessage(f"Task: {TASK} Modules written and read; review pending.")
        who = "main" if "task" in names else "sub"
        self._requests.append(Request(who, list(messages), list(self.bound)))
        n = self._turns.get(who, 0)
        self._turns[who] = n + 1
        if who == "sub":
            return (
                sub_step(n) if n < SUB_STEPS else AIMessage("Module 3 is off by one.")
            )
        return main_step(n) if n < MAIN_STEPS else AIMessage("All modules fixed.")


class SectionWriter(ScriptedChatModel):
    """``CompactionMiddleware``'s summarizer: its sections, each call recorded."""

    _requests: list[Request] = PrivateAttr(default_factory=list)

    @classmethod
    def into(cls, requests: list[Request]) -> SectionWriter:
        """A writer recording its calls, as ``"compaction"``, in ``requests``."""
        writer = cls()
        writer._requests = requests
        return writer

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        self._requests.append(Request("compaction", list(messages), []))
        return AIMessage(SECTIONS)


def judge(window: int) -> ContextGuard:
    """A fresh guard for ``window``: counts a request as the guard would."""
    return ContextGuard(GuardPolicy(context_window=window))


@dataclass(frozen=True)
class Run:
    """A finished deep-agent run and what its model received."""

    state: dict[str, Any]
    requests: list[Request]
    window: int

    def of(self, who: str) -> list[Request]:
        """The requests one party made."""
        return [r for r in self.requests if r.who == who]

    def tokens(self, who: str) -> list[int]:
        """Each of ``who``'s requests, counted with its tools."""
        guard = judge(self.window)
        return [guard.count_tokens(r.messages, tools=r.tools) for r in self.of(who)]

    def over_budget(self, who: str) -> int:
        """How many of ``who``'s requests exceed the guard's budget."""
        budget = judge(self.window).budget()
        return sum(t > budget for t in self.tokens(who))

    def lost(self) -> dict[int, str]:
        """Main requests missing the task or the result of the call just made."""
        missing = {}
        for n, request in enumerate(self.of("main")):
            last = request.messages[-1]
            if not any(TASK in m.text for m in request.messages):
                missing[n] = "task"
            elif n and getattr(last, "tool_call_id", None) != f"main_{n - 1}":
                missing[n] = f"result of main_{n - 1}"
        return missing


def run(
    window: int,
    build: Callable[[DeepScript], dict[str, Any]] | None = None,
    *,
    asynchronous: bool = False,
    **agent: Any,
) -> Run:
    """``create_deep_agent`` over ``DeepScript`` with ``agent``, run on ``TASK``.

    ``build`` gives more of ``create_deep_agent``'s arguments from the model;
    ``asynchronous`` runs it with ``ainvoke``.
    """
    from deepagents import create_deep_agent

    model = DeepScript(profile={"max_input_tokens": window})
    agent = {**agent, **(build(model) if build else {})}
    middleware = [TodoListMiddleware(), *agent.pop("middleware", [])]
    graph = create_deep_agent(model, middleware=middleware, **agent)
    start, config = {"messages": [HumanMessage(TASK)]}, {"recursion_limit": 1_000}
    if asynchronous:
        state = asyncio.run(graph.ainvoke(start, config))
    else:
        state = graph.invoke(start, config)
    return Run(state, list(model.requests), window)
