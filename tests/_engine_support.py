"""Builders and checks shared by the engine tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)


def call(call_id: str, name: str = "bash", **args: Any) -> dict[str, Any]:
    """A LangChain tool call dict."""
    return {"id": call_id, "name": name, "args": args or {"cmd": call_id}}


def ai(*calls: dict[str, Any], content: Any = "", **kwargs: Any) -> AIMessage:
    """An assistant message making ``calls``."""
    return AIMessage(content=content, tool_calls=list(calls), **kwargs)


def result(call_id: str, content: Any = "ok", **kwargs: Any) -> ToolMessage:
    """A tool result answering ``call_id``."""
    return ToolMessage(content=content, tool_call_id=call_id, **kwargs)


def lines(n: int, prefix: str = "line") -> str:
    """``n`` numbered lines of text."""
    return "\n".join(f"{prefix} {i}: some tool output here" for i in range(n))


def agent_history(
    steps: int, *, result_chars: int = 2_000, task: str = "Fix the bug."
) -> list[BaseMessage]:
    """System + task, then ``steps`` assistant-call + tool-result pairs."""
    history: list[BaseMessage] = [
        SystemMessage("You are a coding agent.", id="sys"),
        HumanMessage(task, id="task"),
    ]
    for k in range(steps):
        history.append(ai(call(f"c{k}", cmd=f"cat f{k}.py"), id=f"a{k}"))
        body = lines(max(result_chars // 36, 1), prefix=f"r{k}")
        history.append(result(f"c{k}", body[:result_chars], id=f"t{k}"))
    return history


def chat_history(turns: int, *, words: int = 200) -> list[BaseMessage]:
    """System, then ``turns`` user/assistant exchanges, each with one tool call."""
    history: list[BaseMessage] = [SystemMessage("Be helpful.", id="sys")]
    for t in range(turns):
        history.append(HumanMessage(f"question {t} " + "word " * words, id=f"u{t}"))
        history.append(ai(call(f"q{t}"), id=f"a{t}"))
        history.append(result(f"q{t}", "data " * words, id=f"t{t}"))
        history.append(AIMessage(f"answer {t} " + "text " * words, id=f"r{t}"))
    return history


def snapshot(messages: Sequence[BaseMessage]) -> str:
    """A byte-exact JSON image of ``messages`` (for unchanged/deterministic checks)."""
    return json.dumps(
        [[type(m).__name__, m.model_dump(warnings=False)] for m in messages],
        sort_keys=True,
        default=repr,
    )


def pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """Violations of: every call answered once, right after it; no stray result."""
    errors: list[str] = []
    i = 0
    while i < len(messages):
        m = messages[i]
        if isinstance(m, ToolMessage):
            errors.append(f"stray result {m.tool_call_id!r} at {i}")
            i += 1
            continue
        i += 1
        if isinstance(m, AIMessage) and m.tool_calls:
            want = [c["id"] for c in m.tool_calls]
            got: list[str] = []
            while i < len(messages) and isinstance(messages[i], ToolMessage):
                got.append(messages[i].tool_call_id)  # type: ignore[attr-defined]
                i += 1
            if sorted(got) != sorted(want):
                errors.append(f"call ids {want} answered by {got}")
    return errors


def assert_paired(messages: Sequence[BaseMessage]) -> None:
    """Fail with the pairing violations, if any."""
    errors = pairing_errors(messages)
    assert not errors, errors
