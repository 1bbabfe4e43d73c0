"""Hash keys of texts and messages for the counters' caches (``_counters``)."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage


def text_key(text: str) -> int:
    """A text's length and hash in one int: a key the garbage collector skips.

    A tuple would be tracked, and a warm call keeps a few new ones per long
    text: they bring the next young collection (which traverses the caller's
    whole fresh history list) nearer.
    """
    return hash(text) ^ (len(text) << 64)


def content_key(
    message: BaseMessage,
    calls_seen: dict[tuple[int, int], int] | None = None,
) -> tuple[Any, ...]:
    """What a message's count depends on, hashed (for equal rebuilt messages).

    ``calls_seen``: tool-call hashes by the identity of the lists, kept by a
    caller that meets the same lists in several messages, all alive while the
    table is (their identities are not reused).
    """
    content = message.content
    # ``repr`` is C-fast and, like ``json.dumps``, equal for equal data built
    # alike (a differently ordered copy only misses the cache).
    content_key: Any = (
        (len(content), hash(content))
        if isinstance(content, str)
        else hash(repr(content))
    )
    calls: Any = ()
    if isinstance(message, AIMessage):
        tool_calls, invalid = message.tool_calls, message.invalid_tool_calls
        if tool_calls or invalid:
            slot = (id(tool_calls), id(invalid))
            calls = calls_seen.get(slot) if calls_seen is not None else None
            if calls is None:
                calls = hash(repr([tool_calls, invalid]))
                if calls_seen is not None:
                    calls_seen[slot] = calls
        reasoning = message.additional_kwargs.get("reasoning_content")
        if isinstance(reasoning, str):
            calls = (calls, hash(reasoning))
    return (message.type, message.name, content_key, calls)
