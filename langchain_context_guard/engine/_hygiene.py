"""Pass 7: shape rules every provider enforces."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ._messages import MARKER_KEY, is_empty, map_messages, memo_rewrite

HISTORY_START = (
    "(Earlier messages of this conversation were removed to fit the context window.)"
)
EMPTY_RESULT = "(no output)"


def enforce_provider_hygiene(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Make the first non-system message a user message and drop empty messages.

    Anthropic and Gemini require the conversation to open with a user turn; when
    trimming left an assistant message first, a marked placeholder user message is
    put before it. Empty tool results get a short placeholder text.
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


def history_start() -> HumanMessage:
    """The marked user message put first when trimming left none there."""
    return HumanMessage(
        HISTORY_START,
        id="context-guard-history-start",
        additional_kwargs={MARKER_KEY: {"kind": "placeholder"}},
    )


def tidy_message(message: BaseMessage) -> BaseMessage | None:
    """One message as hygiene leaves it (None: dropped as empty)."""
    if isinstance(message, ToolMessage):
        if message.content:
            return message
        return memo_rewrite(message, "hygiene", _placeholder)
    return None if is_empty(message) else message


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
