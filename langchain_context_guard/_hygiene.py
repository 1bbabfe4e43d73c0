"""Pass 7: shape rules every provider enforces."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ._messages import MARKER_KEY, is_empty, same_list

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
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage) and not message.content:
            message = message.model_copy(
                update={
                    "content": EMPTY_RESULT,
                    "additional_kwargs": {
                        **message.additional_kwargs,
                        MARKER_KEY: {"kind": "placeholder"},
                    },
                }
            )
        elif is_empty(message):
            continue
        out.append(message)
    first = next(
        (i for i, m in enumerate(out) if not isinstance(m, SystemMessage)), None
    )
    if first is not None and not isinstance(out[first], HumanMessage):
        out.insert(
            first,
            HumanMessage(
                HISTORY_START,
                id="context-guard-history-start",
                additional_kwargs={MARKER_KEY: {"kind": "placeholder"}},
            ),
        )
    return messages if same_list(messages, out) else out  # type: ignore[return-value]
