"""Fakes shared by the adapter, compaction, recovery and overflow tests.

- ``ScriptedChatModel``: langchain-core's ``GenericFakeChatModel`` that records
  every input; subclasses script the reply by overriding ``reply``.
- ``ScriptedToolModel``: an agent model that calls a tool ``steps`` times, then
  answers; its ``bind_tools`` returns the model itself.
- ``pairing_errors``: every tool call answered right after it, no stray result.
- ``tool_step`` / ``tool_history``: tool calls with bulky results.
- ``agent_loop``: the agent <-> tools graph, for hand-written agent nodes.
- ``FakeAPIStatusError`` / ``FakeClientError`` / ``OPENAI_TPM``: provider errors
  shaped like the SDKs' (no SDK is installed).
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from pydantic import Field, PrivateAttr

from langchain_context_guard.engine._messages import marker

# -- chat models ----------------------------------------------------------------


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model that records every input it receives.

    The reply is ``reply(messages, **kwargs)``: by default the next of ``messages``,
    as in ``GenericFakeChatModel``. It never streams unless ``disable_streaming`` is
    set to False, and has no ``bind_tools`` (so ``with_structured_output`` fails, as
    with a model that cannot call tools).
    """

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    disable_streaming: bool = True
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _received: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def received(self) -> list[list[BaseMessage]]:
        """Every input the model was called with, in order."""
        return self._received

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        """The answer to ``messages`` (called after recording, under the lock)."""
        message = next(self.messages)
        return AIMessage(message) if isinstance(message, str) else message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        with self._lock:
            self._received.append(list(messages))
            message = self.reply(messages, **kwargs)
        return ChatResult(generations=[ChatGeneration(message=message)])


def last_user_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the latest user message the library did not write."""
    for m in reversed(messages):
        if isinstance(m, HumanMessage) and marker(m) is None:
            return m.text
    return ""


def _chunk_args(k: int) -> dict[str, Any]:
    return {"k": k}


class ScriptedToolModel(ScriptedChatModel):
    """Calls ``tool_name`` ``steps`` times per user turn, then answers.

    The turn is recognised by the text of the latest user message, so a fresh
    instance continues a resumed thread. With ``per_turn=False`` the calls are
    counted over the model's life instead (for agents whose history is summarised
    away). Call ``k`` (counted over all turns) gets the arguments ``args(k)``; the
    answer is ``answer`` formatted with ``n``, the calls made in the turn.
    """

    steps: int = 100
    tool_name: str = "read_chunk"
    args: Callable[[int], dict[str, Any]] = _chunk_args
    answer: str = "Done after {n} reads."
    per_turn: bool = True
    bound_tools: list[Any] = Field(default_factory=list)
    _calls: dict[str, int] = PrivateAttr(default_factory=dict)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        self.bound_tools = list(tools)
        return self

    def reply(self, messages: list[BaseMessage], **kwargs: Any) -> AIMessage:
        text = last_user_text(messages) if self.per_turn else ""
        turn = hashlib.sha1(text.encode()).hexdigest()[:8]
        n = self._calls.get(turn, 0)
        self._calls[turn] = n + 1
        if n >= self.steps:
            return AIMessage(self.answer.format(n=n), id=f"ai_{turn}_final")
        k = sum(min(c, self.steps) for c in self._calls.values()) - 1
        call = {"name": self.tool_name, "args": self.args(k), "id": f"call_{turn}_{n}"}
        return AIMessage("", tool_calls=[call], id=f"ai_{turn}_{n}")


# -- checks ---------------------------------------------------------------------


def pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """Violations of: every call answered once, right after it; no stray result."""
    errors: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if isinstance(m, ToolMessage):
            errors.append(f"stray result {m.tool_call_id!r} at {i - 1}")
        elif isinstance(m, AIMessage) and m.tool_calls:
            want = [c["id"] for c in m.tool_calls]
            got: list[str] = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                got.append(messages[i].tool_call_id)  # type: ignore[attr-defined]
                i += 1
            if Counter(got) != Counter(want):
                errors.append(f"calls {want} at {i - len(got) - 1} answered by {got}")
    return errors


# -- histories ------------------------------------------------------------------

ToolArgs = Callable[[int, int], dict[str, Any]]
"""``(step, call in the step) -> the call's arguments``."""


def _file_args(k: int, j: int) -> dict[str, Any]:
    return {"path": f"src/file_{k}_{j}.py"}


def tool_step(
    k: int,
    output: str,
    *,
    tool: str = "read_file",
    args: ToolArgs = _file_args,
    parallel: int = 1,
) -> list[BaseMessage]:
    """Step ``k``: one assistant message calling ``tool`` ``parallel`` times, then
    the results (each ``output``). Ids: ``ai-k``, ``call-k-j``, ``tool-k-j``."""
    calls = [
        {"name": tool, "args": args(k, j), "id": f"call-{k}-{j}"}
        for j in range(parallel)
    ]
    out: list[BaseMessage] = [AIMessage("", tool_calls=calls, id=f"ai-{k}")]
    out += [
        ToolMessage(output, tool_call_id=c["id"], name=tool, id=f"tool-{k}-{j}")
        for j, c in enumerate(calls)
    ]
    return out


def tool_history(
    steps: int,
    output: Callable[[int], str],
    *,
    system: str = "You are a coding agent.",
    task: str = "Fix the bug.",
    tool: str = "read_file",
    args: ToolArgs = _file_args,
    parallel_every: int = 0,
) -> list[BaseMessage]:
    """System prompt (id ``sys``), the task (id ``task``), then ``steps`` tool steps
    with results ``output(k)``; every ``parallel_every``-th step calls three tools."""
    out: list[BaseMessage] = [
        SystemMessage(system, id="sys"),
        HumanMessage(task, id="task"),
    ]
    for k in range(steps):
        parallel = 3 if parallel_every and k % parallel_every == 0 else 1
        out += tool_step(k, output(k), tool=tool, args=args, parallel=parallel)
    return out


def agent_loop(
    state: type[Any],
    agent: Any,
    tools: Any,
    route: Callable[[Any], str],
) -> StateGraph[Any]:
    """The graph of a tool-calling agent: START -> agent, then ``route`` picks
    ``"tools"`` (which leads back to the agent) or ``END``."""
    graph = StateGraph(state)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    return graph


# -- provider errors ------------------------------------------------------------


class FakeAPIStatusError(Exception):
    """Shaped like openai/anthropic ``APIStatusError``."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        body: object = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body
        self.code = code


class FakeClientError(Exception):
    """Shaped like ``botocore.exceptions.ClientError``."""

    def __init__(self, code: str, message: str, operation: str, status: int) -> None:
        super().__init__(
            f"An error occurred ({code}) when calling the {operation} operation: "
            f"{message}"
        )
        self.response: dict[str, Any] = {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status},
        }


OPENAI_TPM = (
    "Error code: 429 - {'error': {'message': 'Request too large for gpt-4o in "
    "organization org-abc123 on tokens per min (TPM): Limit 30000, Requested 45000. "
    "The input or output tokens must be reduced in order to run successfully. Visit "
    "https://platform.openai.com/account/rate-limits to learn more.', 'type': "
    "'tokens', 'param': None, 'code': 'rate_limit_exceeded'}}"
)
"""OpenAI's tokens-per-minute rate-limit text: it names token figures, yet it is
not a context overflow."""
