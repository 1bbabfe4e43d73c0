"""A deep agent guarded as docs/deepagents.md says, against the stand-ins over HTTP.

A real ``create_deep_agent`` over a real ``ChatAnthropic`` (and ``ChatOpenAI``)
with a system prompt, ``memory=`` and the guard's cache breakpoints talks to the
stand-in server, which scripts the replies of ``tests/deepagents``: the main
agent writes its to-dos, writes and reads back modules of log-like code and hands
one review to the general-purpose sub-agent through ``task``, which reads
modules; deepagents' summary call gets a summary that keeps the task,
``CompactionMiddleware``'s gets its sections. The server counts 1.25 times
cl100k and refuses a request over the window or breaking a rule (pairs, roles,
4 cache breakpoints); every request the model sent is also counted with the
guard's own counter against its budget. The same run unguarded is refused.
``table`` prints the figures of docs/deepagents.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from langchain.agents.middleware import TodoListMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from langchain_context_guard import (
    CompactionMiddleware,
    ContextGuard,
    ContextGuardMiddleware,
    GuardPolicy,
    guarded_subagents,
    guarded_summarization,
)
from tests.deepagents._support import (
    MAIN_STEPS,
    NEEDS_HOOK,
    SUB_STEPS,
    TASK,
    main_step,
    sub_step,
)

from ._replies import Scripted
from ._rules import Body
from ._server import ProviderServer
from ._support import QUIET_RETIREMENT, SYSTEM, chat_model

pytestmark = [QUIET_RETIREMENT, NEEDS_HOOK]
MakeServer = Callable[..., ProviderServer]
RESERVE = 2_000
DENSER = 1.25
"""The stand-ins count 1.25 times cl100k: providers denser than the guard's count."""
MEMORY = "Run the tests before answering. Keep the modules under /src."
SECTIONS = {
    "completed": ["wrote and read back the checksum modules so far"],
    "remaining": ["finish the modules, review them, fix what is wrong"],
    "current_state": ["modules under /src, review pending"],
    "files": ["/src/mod_*.py: written"],
    "notes": [],
}


def _tool_names(tools: list[Any]) -> set[str]:
    return {str(t.get("function", t).get("name")) for t in tools}


def _who(tools: list[Any], last: str) -> str:
    """Who sent a request: a summariser, the main agent (with ``task``), a sub-agent."""
    names = _tool_names(tools)
    if "<conversation" in last or "SummarySections" in names:
        return "compaction"
    if "<messages>" in last:
        return "summary"
    return "main" if "task" in names else "sub"


def _scripted(reply: AIMessage, step: int) -> Scripted:
    if not reply.tool_calls:
        return Scripted(reply.text)
    call = reply.tool_calls[0]
    return Scripted(f"Step {step}.", call["name"], call["args"])


class DeepReplies:
    """The replies of ``tests/deepagents``' scripted deep agent, from the body."""

    def __init__(self) -> None:
        self.turns: dict[str, int] = {}

    def __call__(self, body: Body) -> Scripted:
        last = json.dumps(body["messages"][-1])
        who = _who(body.get("tools") or [], last)
        if who == "summary":
            return Scripted(f"Task: {TASK} Modules written and read; review pending.")
        if who == "compaction":  # structured: a forced tool, or a JSON schema
            if body.get("tools"):
                return Scripted("", "SummarySections", SECTIONS)
            return Scripted(json.dumps(SECTIONS))
        n = self.turns.get(who, 0)
        self.turns[who] = n + 1
        if who == "sub":
            done = AIMessage("Module 3 is off by one.")
            return _scripted(sub_step(n) if n < SUB_STEPS else done, n)
        done = AIMessage("All modules fixed.")
        return _scripted(main_step(n) if n < MAIN_STEPS else done, n)


@dataclass(frozen=True)
class Request:
    """One request as the chat model sent it: who, its messages and tools."""

    who: str
    messages: list[BaseMessage]
    tools: list[Any]


class Sent(BaseCallbackHandler):
    """Records every request the chat model sends, after all the middleware."""

    def __init__(self) -> None:
        self.requests: list[Request] = []

    def on_chat_model_start(
        self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        tools = list((kwargs.get("invocation_params") or {}).get("tools") or [])
        last = messages[0][-1].text if messages[0] else ""
        self.requests.append(Request(_who(tools, last), messages[0], tools))

    def of(self, who: str) -> list[Request]:
        """The requests one party sent."""
        return [r for r in self.requests if r.who == who]


Setup = Literal["bare", "deepagents", "compaction"]
"""deepagents' own middleware only; guarded as the docs say; and with ours too."""


def _guarded(model: Any, setup: Setup) -> dict[str, Any]:
    """``create_deep_agent`` arguments guarded as docs/deepagents.md says."""
    if setup == "bare":
        return {"middleware": [TodoListMiddleware()]}
    summarize = guarded_summarization(model)
    guard = ContextGuardMiddleware(cache_breakpoints=True)
    middleware = [TodoListMiddleware(), guard, summarize]
    if setup == "compaction":
        middleware.insert(1, CompactionMiddleware(model))
    subagents = guarded_subagents(middleware=[summarize], cache_breakpoints=True)
    return {"middleware": middleware, "subagents": subagents}


def _run(server: ProviderServer, provider: str, window: int, setup: Setup) -> Sent:
    """The scripted run; a bare agent goes on after a refusal (deepagents'
    summarization recovers from one), a guarded one would stop."""
    from deepagents import create_deep_agent
    from deepagents.backends.utils import create_file_data

    sent = Sent()
    model = chat_model(
        provider,
        server,
        max_tokens=RESERVE,
        profile={"max_input_tokens": window},
        callbacks=[sent],
    )
    graph = create_deep_agent(
        model, system_prompt=SYSTEM, memory=["/AGENTS.md"], **_guarded(model, setup)
    )
    files = {"/AGENTS.md": create_file_data(MEMORY)}
    start = {"messages": [HumanMessage(TASK)], "files": files}
    state = graph.invoke(start, {"recursion_limit": 1_000})
    assert state["messages"][-1].text == "All modules fixed."
    return sent


def _over_budget(sent: Sent, window: int) -> dict[str, list[int]]:
    """Each party's requests over the budget, counted with the guard's counter."""
    judge = ContextGuard(GuardPolicy(reserve_tokens=RESERVE, context_window=window))
    parties = {
        "main": sent.of("main"),
        "sub": sent.of("sub"),
        "summary": sent.of("summary") + sent.of("compaction"),
    }
    return {
        who: [
            n
            for n, r in enumerate(requests)
            if judge.count_tokens(r.messages, tools=r.tools) > judge.budget()
        ]
        for who, requests in parties.items()
    }


@pytest.mark.parametrize("setup", ["deepagents", "compaction"])
@pytest.mark.parametrize("window", [16_000, 32_000], ids=["16k", "32k"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_guarded_deep_agent_is_refused_nothing_and_never_over_budget(
    make_server: MakeServer, provider: str, window: int, setup: Setup
) -> None:
    server = make_server(limit=window, multiplier=DENSER, script=DeepReplies())
    sent = _run(server, provider, window, setup)
    assert [e.error for e in server.rejections] == []
    assert len(server.exchanges) == len(sent.requests)
    main, sub = sent.of("main"), sent.of("sub")
    assert (len(main), len(sub)) == (MAIN_STEPS + 1, SUB_STEPS + 1)
    assert sent.of("summary" if setup == "deepagents" else "compaction")
    assert _over_budget(sent, window) == {"main": [], "sub": [], "summary": []}
    assert [n for n, r in enumerate(main) if not _task_and_result(r, n)] == []
    assert sum(e.tokens for e in server.accepted) > 10 * window  # pruned, summarised


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_without_the_guard_the_stand_ins_refuse_the_deep_agent(
    make_server: MakeServer, provider: str
) -> None:
    server = make_server(limit=16_000, multiplier=DENSER, script=DeepReplies())
    _run(server, provider, 16_000, "bare")
    assert {e.verdict for e in server.rejections} == {"too_long"}


def _task_and_result(request: Request, n: int) -> bool:
    """The request holds the task (verbatim or in a summary) and ends on a result."""
    has_task = any(TASK in m.text for m in request.messages)
    return has_task and (n == 0 or isinstance(request.messages[-1], ToolMessage))


SETUPS: tuple[Setup, ...] = ("bare", "deepagents", "compaction")
NAMES = {
    "bare": "none (deepagents' own)",
    "deepagents": "deepagents' (`guarded_summarization`)",
    "compaction": "+ `CompactionMiddleware`",
}


def table() -> str:
    """The figures of docs/deepagents.md, over HTTP."""
    rows = [
        "| provider | window | guard and summarisation | requests (main / "
        "sub-agent / summary calls) | refused | over budget |",
        "|---|---|---|---|---|---|",
    ]
    for provider in ("anthropic", "openai"):
        for window in (16_000, 32_000):
            for setup in SETUPS:
                server = ProviderServer(
                    limit=window, multiplier=DENSER, script=DeepReplies()
                ).start()
                try:
                    sent = _run(server, provider, window, setup)
                finally:
                    server.close()
                over = sum(map(len, _over_budget(sent, window).values()))
                summaries = len(sent.of("summary")) + len(sent.of("compaction"))
                rows.append(
                    f"| {'Anthropic' if provider == 'anthropic' else 'OpenAI'} "
                    f"| {window // 1000}k | {NAMES[setup]} | {len(sent.of('main'))} "
                    f"/ {len(sent.of('sub'))} / {summaries} "
                    f"| {len(server.rejections)} | {over} |"
                )
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
