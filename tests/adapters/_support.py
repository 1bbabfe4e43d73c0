"""Guard settings, big-output tools and model-input checks for adapter tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import tool

from langchain_context_guard import ContextGuard, GuardPolicy
from tests.fakes import last_user_text, pairing_errors, tool_history

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
        # Each step's 20-60 KB output is kept near whole so a few steps fill the
        # window and prune; the default share (0.1) would cut each to 1.7k tokens.
        "max_tool_result_share": 0.5,
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
BIG_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "word " * 4_000,
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
"""An OpenAI tool schema of about 4,000 tokens."""


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
    assert last_user_text(messages) == user_text


def full_length(steps: int) -> int:
    """Messages of one finished turn: user, steps x (call + result), answer."""
    return 1 + 2 * steps + 1


def long_history(pairs: int = 40, *, task: str = "Fix the bug.") -> list[BaseMessage]:
    """System prompt, a task, then ``pairs`` read_chunk calls with big results."""
    return tool_history(
        pairs,
        big_output,
        system=SYSTEM,
        task=task,
        tool="read_chunk",
        args=lambda k, j: {"k": k},
    )


def sent_models(middleware: Any, model: Any, calls: int = 2) -> list[Any]:
    """The model each of ``calls`` requests through ``middleware`` reached."""
    from langchain.agents.middleware.types import ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, HumanMessage

    seen: list[Any] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(request.model)
        return ModelResponse(result=[AIMessage("ok")])

    for _ in range(calls):
        request = ModelRequest(model=model, messages=[HumanMessage("Fix the bug.")])
        middleware.wrap_model_call(request, handler)
    return seen
