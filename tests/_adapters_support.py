"""Scripted chat model, big-output tools and model-input checks for adapter tests."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Sequence
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
from langchain_core.tools import tool
from pydantic import Field, PrivateAttr

from langchain_context_guard import ContextGuard, GuardPolicy
from langchain_context_guard._messages import marker

SYSTEM = "You are a careful coding agent. Read files with read_chunk, then answer."
WINDOW = 20_000
RESERVE = 3_000
BUDGET = WINDOW - RESERVE


def make_guard(**overrides: Any) -> ContextGuard:
    """A guard with a small window, so pruning happens within a few steps."""
    settings: dict[str, Any] = {
        "context_window": WINDOW,
        "reserve_tokens": RESERVE,
        "warn_below_tokens": 16_000,
    }
    settings.update(overrides)
    return ContextGuard(GuardPolicy(**settings))


def big_output(k: int) -> str:
    """A deterministic tool output of 20-60 KB."""
    size = 20_000 + (k * 7_919) % 40_000
    lines: list[str] = []
    total = 0
    i = 0
    while total < size:
        line = f"{k:04d}:{i:05d} def handler_{i}(req): return compute(req, {k * i})"
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines)


@tool
def read_chunk(k: int) -> str:
    """Read chunk number k of the repository."""
    return big_output(k)


@tool
def read_note(k: int) -> str:
    """Read note number k (2-6 KB)."""
    return big_output(k)[: 2_000 + (k * 977) % 4_000]


TOOLS = [read_chunk]


def _user_text(messages: Sequence[BaseMessage]) -> str:
    for m in reversed(messages):
        if isinstance(m, HumanMessage) and marker(m) is None:
            return m.text
    return ""


class ScriptedToolModel(GenericFakeChatModel):
    """Calls ``read_chunk`` ``steps`` times per user turn, then answers.

    Records every message list it receives. The turn is recognised by the text of
    the latest user message, so a fresh instance continues a resumed thread.
    """

    messages: Iterator[AIMessage | str] = Field(default_factory=lambda: iter(()))
    steps: int = 100
    tool_name: str = "read_chunk"
    disable_streaming: bool = True
    received: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _calls: dict[str, int] = PrivateAttr(default_factory=dict)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolModel:
        self.bound_tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = _user_text(messages)
        turn = hashlib.sha1(text.encode()).hexdigest()[:8]
        with self._lock:
            self.received.append(list(messages))
            n = self._calls.get(turn, 0)
            self._calls[turn] = n + 1
            k = sum(min(c, self.steps) for c in self._calls.values()) - 1
        if n < self.steps:
            call = {"name": self.tool_name, "args": {"k": k}, "id": f"call_{turn}_{n}"}
            message = AIMessage("", tool_calls=[call], id=f"ai_{turn}_{n}")
        else:
            message = AIMessage(f"Done after {n} reads.", id=f"ai_{turn}_final")
        return ChatResult(generations=[ChatGeneration(message=message)])


def pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """Every tool call answered right after it; no orphan tool result."""
    errors: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolMessage):
            errors.append(f"orphan tool result {m.tool_call_id} at {i}")
        elif isinstance(m, AIMessage) and m.tool_calls:
            ids = [c["id"] for c in m.tool_calls]
            answers = messages[i + 1 : i + 1 + len(ids)]
            got = [a.tool_call_id for a in answers if isinstance(a, ToolMessage)]
            if sorted(got) != sorted(ids):
                errors.append(f"calls {ids} at {i} answered by {got}")
            i += len(got)
        i += 1
    return errors


def check_model_input(
    guard: ContextGuard,
    messages: Sequence[BaseMessage],
    *,
    user_text: str,
    tools: Sequence[Any] | None = None,
    budget: int = BUDGET,
    system_text: str = SYSTEM,
) -> None:
    """What one model call received: in budget, paired, system and user present."""
    assert guard.count_tokens(list(messages), tools=tools) <= budget
    assert pairing_errors(messages) == []
    assert isinstance(messages[0], SystemMessage)
    assert messages[0].text == system_text
    assert _user_text(messages) == user_text


def full_length(steps: int) -> int:
    """Messages of one finished turn: user, steps x (call + result), answer."""
    return 1 + 2 * steps + 1


def long_history(pairs: int = 40, *, task: str = "Fix the bug.") -> list[BaseMessage]:
    """System prompt, a task, then ``pairs`` read_chunk calls with big results."""
    history: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(task, id="task")]
    for k in range(pairs):
        call = {"name": "read_chunk", "args": {"k": k}, "id": f"call_{k}"}
        history += [
            AIMessage("", tool_calls=[call], id=f"ai_{k}"),
            ToolMessage(big_output(k), tool_call_id=f"call_{k}", id=f"tool_{k}"),
        ]
    return history
