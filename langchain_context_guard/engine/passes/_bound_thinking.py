"""Pass 10: drop signed reasoning whose prefix an edit changed.

Newer Claude models bind each signed thinking block (``thinking`` with a
``signature``, and ``redacted_thinking``) to the exact conversation before it
and reject a replay once that changed ("The block is bound to a different
conversation"). Any edit before a kept block (a compressed or truncated
result, a trimmed head, a digest, stripped older reasoning) makes it stale.
``drop_stale_thinking`` removes exactly those blocks: the ones after the first
message the passes changed, and in that message the ones after its first
changed block. The message keeps its text and tool calls; one left with
nothing goes at hygiene. Where the prompt is unchanged, nothing is done.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from .._messages import memo_rewrite


def is_signed(block: Any) -> bool:
    """Whether a content block is reasoning bound to its prefix."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    return kind == "redacted_thinking" or (
        kind == "thinking" and bool(block.get("signature"))
    )


def holds_signed(message: BaseMessage) -> bool:
    """Whether ``message`` is an assistant message with a signed reasoning block."""
    content = message.content
    return (
        isinstance(message, AIMessage)
        and isinstance(content, list)
        and any(map(is_signed, content))
    )


def drop_stale_thinking(
    sent: Sequence[BaseMessage], original: Sequence[BaseMessage], start: int = -1
) -> list[BaseMessage]:
    """``sent`` without the signed reasoning whose prefix differs from ``original``'s.

    ``start``: a place up to which both are known to hold the same messages
    (the incremental path knows one). The same list when no kept block is stale.
    """
    d = 0 if start < 0 else start
    end = min(len(sent), len(original))
    while d < end and sent[d] is original[d]:
        d += 1
    out: list[BaseMessage] | None = None
    for i in range(d, len(sent)):
        message = sent[i]
        if not holds_signed(message):
            continue
        if i == d and i < len(original):
            new = _edited_in_place(message, original[i])
        else:
            new = memo_rewrite(message, "bound_thinking", _unsigned)
        if new is not message:
            if out is None:
                out = list(sent)
            out[i] = new
    if out is not None:
        return out
    return sent if isinstance(sent, list) else list(sent)


def _unsigned(message: BaseMessage, keep: int = 0) -> BaseMessage:
    """``message`` without signed reasoning from content position ``keep`` on."""
    content: Any = message.content
    kept = [b for i, b in enumerate(content) if i < keep or not is_signed(b)]
    return message.model_copy(update={"content": kept or ""})


def _edited_in_place(message: BaseMessage, was: BaseMessage) -> BaseMessage:
    """The first changed message: its blocks before its first edit keep their prefix."""
    if not isinstance(was, AIMessage) or message.id != was.id:
        return _unsigned(message)
    old: Any = was.content
    old = old if isinstance(old, list) else [old]
    content: Any = message.content
    same = 0
    while same < min(len(content), len(old)) and content[same] == old[same]:
        same += 1
    if not any(map(is_signed, content[same:])):
        return message
    return _unsigned(message, same)
