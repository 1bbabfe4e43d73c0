"""Pass 7: shape rules every provider enforces."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ._messages import MARKER_KEY, is_empty, map_messages, memo_rewrite

HISTORY_START = (
    "(Earlier messages of this conversation were removed to fit the context window.)"
)
CONVERSATION_START = "(The conversation so far:)"
"""The placeholder's text when the history never opened with a user message."""
EMPTY_RESULT = "(no output)"


def enforce_provider_hygiene(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Make the first non-system message a user message and drop empty messages.

    Anthropic and Gemini require the conversation to open with a user turn; when
    trimming left an assistant message first, a marked placeholder user message is
    put before it. Empty tool results get a short placeholder text, and blank text
    blocks are dropped from other messages (Anthropic and Gemini reject them), as
    are assistant messages left with only reasoning (OpenAI drops reasoning, and
    an assistant message with nothing else is rejected).
    """
    out = map_messages(messages, tidy_message)
    first = first_turn(out)
    if first is not None and not isinstance(out[first], HumanMessage):
        return [*out[:first], history_start(), *out[first:]]
    return out


def first_turn(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the first message that is not a system message."""
    return next(
        (i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), None
    )


def history_start(removed: bool = True) -> HumanMessage:
    """The marked user message put first when none is there.

    Its text says earlier messages were removed only when they were (``removed``);
    a history that never opened with a user message gets a neutral one.
    """
    return HumanMessage(
        HISTORY_START if removed else CONVERSATION_START,
        id="context-guard-history-start",
        additional_kwargs={MARKER_KEY: {"kind": "placeholder"}},
    )


def tidy_message(message: BaseMessage) -> BaseMessage | None:
    """One message as hygiene leaves it (None: dropped as empty)."""
    if isinstance(message, ToolMessage):
        if message.content:
            return message
        return memo_rewrite(message, "hygiene", _placeholder)
    if is_empty(message) or _only_reasoning(message):
        return None
    if not _has_blank_text(message.content):
        return message
    new = memo_rewrite(message, "hygiene", _without_blank_text)
    return None if is_empty(new) or _only_reasoning(new) else new


_REASONING = frozenset({"thinking", "redacted_thinking", "reasoning"})


def _only_reasoning(message: BaseMessage) -> bool:
    """An assistant message that would reach the provider with nothing to say."""
    content = message.content
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and isinstance(content, list)
        and all(
            isinstance(b, dict) and b.get("type") in _REASONING
            for b in content
            if not _blank(b)
        )
    )


def _blank(block: object) -> bool:
    if isinstance(block, str):
        return not block.strip()
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and not str(block.get("text") or "").strip()
    )


def _has_blank_text(content: str | list[str | dict[str, Any]]) -> bool:
    if isinstance(content, str):
        return bool(content) and not content.strip()
    return any(map(_blank, content))


def _without_blank_text(message: BaseMessage) -> BaseMessage:
    content = message.content
    kept = "" if isinstance(content, str) else [b for b in content if not _blank(b)]
    return message.model_copy(update={"content": kept})


def _placeholder(message: BaseMessage) -> BaseMessage:
    return message.model_copy(
        update={
            "content": EMPTY_RESULT,
            "additional_kwargs": {
                **message.additional_kwargs,
                MARKER_KEY: {"kind": "placeholder"},
            },
        }
    )
