"""Pass 10: drop signed reasoning whose prefix is no longer the one that produced it.

Newer Claude models bind each signed thinking block (``thinking`` with a
``signature``, and ``redacted_thinking``) to the exact conversation before it
(the prompt whose reply held it, then the blocks before it in that reply) and
reject a replay once that changed ("The block is bound to a different
conversation").

The rule: ``drop_stale_thinking(prompt, produced)`` compares the prompt about
to be sent with ``produced``, the prompt the history's replies came from: what
the guard sent last for this conversation (as the passes left it, before
hygiene), followed by the messages the history added since. Every block sent
then was valid behind its place in it, and a new reply was produced behind
all of it. Where the guard knows nothing (a fresh guard, a conversation it
has not seen), the history as read, its tool pairs repaired (it could not
have been sent otherwise), is the best evidence of what was sent.
Walking both in step, a block is kept while everything before it, and the
blocks before it in its message, are what ``produced`` holds there; a block
that was not sent there (dropped as stale on an earlier call) stays dropped,
so the prompt keeps following what was sent. From the first message that
differs otherwise (a compressed or truncated result, a trimmed head, a
digest, reasoning stripped by the trim), every later block goes: exactly the
ones an edit made stale. The message keeps its text and tool calls; one left
with nothing goes at hygiene. Where the prompt is what was sent plus the new
messages, nothing is done.

A running tool loop's final assistant message is the one exception, applied to
what is sent and never to what is recorded (``keep_final_thinking``, after
every pass): every Claude model with thinking on requires it to start with its
thinking block, so the blocks this pass took from it are put back, and a stale
one is the provider's to drop (the middleware asks binding models for
``prefix_mismatch_behavior="drop_block"``, ``_thinking_binding``). The record of
the prompt lacks them, as the provider read it, so on the next call the block,
no longer final, goes like any other stale one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from .._messages import final_tool_turn, memo_rewrite, same_message


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
    sent: Sequence[BaseMessage], produced: Sequence[BaseMessage], start: int = -1
) -> list[BaseMessage]:
    """``sent`` without the signed reasoning whose prefix differs from ``produced``'s.

    ``produced``: the prompt the history's replies were produced behind (the
    module docstring says which). ``start``: a place up to which both are known
    to hold the same messages (the incremental path knows one). The same list
    when no kept block is stale.
    """
    d = 0 if start < 0 else start
    joined = joined_behind_words(sent, d)
    end = min(len(sent), len(produced), joined)
    while d < end and sent[d] is produced[d]:
        d += 1
    out: list[BaseMessage] | None = None
    following = True
    for i in range(d, len(sent)):
        message = sent[i]
        if i == joined:
            new = memo_rewrite(message, "bound_thinking", unsigned)
            following = False
        elif following:
            was = produced[i] if i < len(produced) else None
            if was is not None and same_message(message, was):
                continue
            if holds_signed(message):
                new = _edited_in_place(message, was)
            else:
                new = message
            following = was is not None and same_message(new, was)
        elif holds_signed(message):
            new = memo_rewrite(message, "bound_thinking", unsigned)
        else:
            continue
        if new is not message:
            if out is None:
                out = list(sent)
            out[i] = new
    if out is not None:
        return out
    return sent if isinstance(sent, list) else list(sent)


REASONING_TYPES = frozenset({"thinking", "redacted_thinking", "reasoning"})
"""Content block types that hold reasoning (Anthropic's, OpenAI's)."""


def joined_behind_words(messages: Sequence[BaseMessage], start: int = 0) -> int:
    """The first message from ``start`` on whose signed blocks a join moves.

    Hygiene joins a run of assistant messages into one (``join_turns``); a later
    one's signed blocks move in front of what an earlier one said, so they no
    longer follow the prefix that produced them, and neither does any block
    after them. ``len(messages)`` when there is none. The run holding ``start``
    is read from its beginning.
    """
    while 0 < start < len(messages) and _joinable(messages[start - 1]):
        start -= 1
    in_run = says = False
    for i in range(start, len(messages)):
        message = messages[i]
        if not isinstance(message, AIMessage):
            in_run = says = False
            continue
        if _removed_at_hygiene(message):
            continue
        if in_run and says and holds_signed(message):
            return i
        says = (says if in_run else False) or _says(message)
        in_run = not message.tool_calls
    return len(messages)


def _joinable(message: BaseMessage) -> bool:
    return isinstance(message, AIMessage) and not message.tool_calls


def _says(message: BaseMessage) -> bool:
    """Whether an assistant message holds anything but reasoning."""
    content: Any = message.content
    if isinstance(content, str):
        return bool(content.strip())
    return any(not is_reasoning(b) and not is_blank(b) for b in content)


def is_reasoning(block: object) -> bool:
    """A content block that holds reasoning (``REASONING_TYPES``)."""
    return isinstance(block, dict) and block.get("type") in REASONING_TYPES


def is_blank(block: object) -> bool:
    """A text block (or string) with nothing but whitespace."""
    if isinstance(block, str):
        return not block.strip()
    return (
        isinstance(block, dict)
        and block.get("type") == "text"
        and not str(block.get("text") or "").strip()
    )


def _removed_at_hygiene(message: AIMessage) -> bool:
    """An assistant message hygiene drops: nothing but reasoning, and no calls."""
    return not message.tool_calls and not _says(message)


def unsigned(message: BaseMessage, keep: int = 0) -> BaseMessage:
    """``message`` without signed reasoning from content position ``keep`` on."""
    content: Any = message.content
    kept = [b for i, b in enumerate(content) if i < keep or not is_signed(b)]
    return message.model_copy(update={"content": kept or ""})


def _edited_in_place(message: BaseMessage, was: BaseMessage | None) -> BaseMessage:
    """A changed message behind a kept prefix: its blocks before its first edit stay.

    A block ``was`` (what was sent there) does not hold at that place goes: it
    was not sent, or not behind this prefix.
    """
    if not isinstance(was, AIMessage) or message.id != was.id:
        return unsigned(message)
    old: Any = was.content
    old = old if isinstance(old, list) else [old]
    content: Any = message.content
    same = 0
    while same < min(len(content), len(old)) and content[same] == old[same]:
        same += 1
    if not any(map(is_signed, content[same:])):
        return message
    return unsigned(message, same)


def keep_final_thinking(
    sent: list[BaseMessage], history: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """``sent`` with a running tool loop's final turn opening with its blocks.

    Where that turn does not open with a signed block, the ones the same reply
    (by id) opens with in ``history`` are put back in front (the binding check
    or a join took them). The same list when the turn opens with one already
    (its own, or a turn's joined in front of it, which the guard holds valid).
    """
    final = final_tool_turn(sent)
    message = sent[final] if final < len(sent) else None
    if not isinstance(message, AIMessage) or message.id is None:
        return sent
    source = next((m for m in reversed(history) if m.id == message.id), None)
    if not isinstance(source, AIMessage) or not isinstance(source.content, list):
        return sent
    leading = []
    for block in source.content:
        if not is_signed(block):
            break
        leading.append(block)
    content: Any = message.content
    if not leading or (isinstance(content, list) and content and is_signed(content[0])):
        return sent
    rest = [b for b in _as_list(content) if b not in leading]
    out = list(sent)
    out[final] = memo_rewrite(
        message,
        ("final_thinking", id(source)),
        lambda m: m.model_copy(update={"content": [*leading, *rest]}),
    )
    return out


def _as_list(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)
