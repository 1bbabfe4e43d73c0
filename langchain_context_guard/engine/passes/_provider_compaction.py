"""Pass 2: send from the latest provider compaction block on.

Anthropic's server-side and on-demand compaction return a ``compaction``
content block, and OpenAI's Responses API a ``compaction`` item, in an
assistant message (langchain-anthropic and langchain-openai round-trip them).
Later requests send it in place of what it summarises and the provider ignores
what precedes it, so the guard drops that head (keeping the system messages
before it). The block itself is opaque: the passes only edit text blocks, so it
is never truncated, compressed or summarised.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

COMPACTION_BLOCK = "compaction"
"""The content block (Anthropic) and output item (OpenAI Responses) type."""


def holds_compaction(message: BaseMessage) -> bool:
    """Whether ``message`` is an assistant message holding a compaction block."""
    if not isinstance(message, AIMessage) or not isinstance(message.content, list):
        return False
    return any(
        isinstance(b, dict) and b.get("type") == COMPACTION_BLOCK
        for b in message.content
    )


def latest_compaction(messages: Sequence[BaseMessage], start: int = 0) -> int | None:
    """Index of the last message from ``start`` holding a compaction block."""
    for i in range(len(messages) - 1, start - 1, -1):
        if holds_compaction(messages[i]):
            return i
    return None


def dropped_before_compaction(messages: Sequence[BaseMessage]) -> list[int]:
    """Indexes ``drop_before_compaction`` removes: all but system messages."""
    at = latest_compaction(messages)
    if at is None:
        return []
    return [i for i in range(at) if not isinstance(messages[i], SystemMessage)]


def drop_before_compaction(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The system messages before the latest compaction block, then all from it.

    The history itself (the same list) when it holds no compaction block, or
    nothing precedes the latest one but system messages.
    """
    gone = set(dropped_before_compaction(messages))
    if not gone:
        return messages if isinstance(messages, list) else list(messages)
    return [m for i, m in enumerate(messages) if i not in gone]
