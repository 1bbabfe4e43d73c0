"""Pass 7: shape rules every provider enforces."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .._events import Edits
from .._messages import (
    MARKER_KEY,
    is_empty,
    is_reasoning_item,
    label,
    map_messages,
    memo_rewrite,
)
from ._bound_thinking import REASONING_TYPES, is_blank, is_reasoning, is_signed

HISTORY_START = (
    "(Earlier messages of this conversation were removed to fit the context window.)"
)
CONVERSATION_START = "(The conversation so far:)"
"""The placeholder's text when the history never opened with a user message."""
EMPTY_RESULT = "(no output)"


def enforce_provider_hygiene(
    messages: Sequence[BaseMessage], *, removed: bool = True, bound: bool = False
) -> list[BaseMessage]:
    """Make the first non-system message a user message and drop empty messages.

    Anthropic and Gemini require the conversation to open with a user turn; when
    trimming left an assistant message first, a marked placeholder user message is
    put before it. Empty tool results get a short placeholder text, and blank text
    blocks are dropped from other messages (Anthropic and Gemini reject them), as
    are assistant messages left with only reasoning (OpenAI drops reasoning, and
    an assistant message with nothing else is rejected). Consecutive assistant
    messages are joined into one (``join_turns``): Anthropic wants roles to
    alternate, and Gemini rejects a function call right after a model turn.
    The placeholder says earlier messages were removed unless ``removed`` is
    False (the history never opened with a user message); ``bound``: the model
    binds signed reasoning to its prefix (``join_turns``).
    """
    out = join_assistant_turns(map_messages(messages, tidy_message), bound=bound)
    first = first_turn(out)
    if first is not None and not isinstance(out[first], HumanMessage):
        return [*out[:first], history_start(removed), *out[first:]]
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


def opens_with_user(messages: Sequence[BaseMessage]) -> bool:
    """Whether the first turn that hygiene keeps is a user message (or none)."""
    lead = next(
        (
            m
            for m in messages
            if not isinstance(m, SystemMessage) and tidy_message(m) is not None
        ),
        None,
    )
    return lead is None or isinstance(lead, HumanMessage)


def hygiene_tokens(
    messages: Sequence[BaseMessage],
    count: Callable[[BaseMessage], int],
    removed: bool,
) -> int:
    """Tokens ``enforce_provider_hygiene`` adds to ``messages``.

    The placeholder first turn (``history_start(removed)``) and the text of empty
    tool results: a candidate is measured as it will be sent.
    """
    extra = 0 if opens_with_user(messages) else count(history_start(removed))
    for m in messages:
        if isinstance(m, ToolMessage) and not m.content:
            new = tidy_message(m)
            extra += count(new) - count(m) if new is not None else 0
    return extra


def _only_reasoning(message: BaseMessage) -> bool:
    """An assistant message that would reach the provider with nothing to say."""
    content = message.content
    return (
        isinstance(message, AIMessage)
        and not message.tool_calls
        and isinstance(content, list)
        and all(
            isinstance(b, dict) and b.get("type") in REASONING_TYPES
            for b in content
            if not is_blank(b)
        )
    )


def _has_blank_text(content: str | list[str | dict[str, Any]]) -> bool:
    if isinstance(content, str):
        return bool(content) and not content.strip()
    return any(map(is_blank, content))


def _without_blank_text(message: BaseMessage) -> BaseMessage:
    content = message.content
    kept = "" if isinstance(content, str) else [b for b in content if not is_blank(b)]
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


def tidy_part(
    source: Sequence[BaseMessage],
    start: int,
    out_start: int,
    count: Callable[[BaseMessage], int],
    after: BaseMessage | None = None,
    *,
    bound: bool = False,
) -> tuple[list[BaseMessage], Edits, int] | None:
    """``tidy_message`` on ``source[start:]``, assistant turns joined.

    Returns the messages (they go at output index ``out_start``), the edits and
    the token change; None when the first of them joins ``after``, the output
    message before them (the part before must change too).
    """
    out: list[BaseMessage] = []
    at: list[int] = []  # source index of each output message
    changed: dict[int, str] = {}
    removed: list[str] = []
    delta = 0
    for i in range(start, len(source)):
        message = source[i]
        new = tidy_message(message)
        if new is None:
            removed.append(label(message, i))
            delta -= count(message)
            continue
        delta += count(new) - count(message)
        before = out[-1] if out else after
        if before is not None and joinable(before) and isinstance(new, AIMessage):
            if not out:
                return None
            joined = join_turns(before, new, bound=bound)
            delta += count(joined) - count(before) - count(new)
            removed.append(label(source[at[-1]], at[-1]))
            changed.pop(len(out) - 1, None)
            out[-1], at[-1] = joined, i
            changed[len(out) - 1] = label(joined, out_start + len(out) - 1)
            continue
        if new is not message:
            changed[len(out)] = label(new, out_start + len(out))
        out.append(new)
        at.append(i)
    edits = Edits(tuple(changed[k] for k in sorted(changed)), tuple(removed))
    return out, edits, delta


def joinable(message: BaseMessage) -> bool:
    """An assistant message the next assistant message is joined to (no calls)."""
    return isinstance(message, AIMessage) and not message.tool_calls


def join_assistant_turns(
    messages: list[BaseMessage], *, bound: bool = False
) -> list[BaseMessage]:
    """``messages`` with each run of assistant messages joined into one.

    After ``repair_tool_pairs`` only the last of a run can make tool calls (the
    others would be followed by their results). The input list if none.
    """
    out: list[BaseMessage] = []
    for message in messages:
        if out and joinable(out[-1]) and isinstance(message, AIMessage):
            out[-1] = join_turns(out[-1], message, bound=bound)
        else:
            out.append(message)
    return out if len(out) < len(messages) else messages


def join_turns(
    first: BaseMessage, second: AIMessage, *, bound: bool = False
) -> AIMessage:
    """One assistant message saying what ``first`` then ``second`` said.

    The content blocks of both in order (thinking blocks first: Anthropic wants
    a turn's thinking before its text and tool use; an OpenAI reasoning item
    stays right before the item it belongs to, ``_leads``), ``second``'s tool calls,
    id, name and metadata, and a ``merged`` marker with the ids of all the
    messages it stands for. With ``bound`` (the model binds signed reasoning to
    its prefix), ``second``'s signed reasoning goes when ``first`` says
    anything: moved in front of it, the block no longer follows the prefix that
    produced it (``_bound_thinking``); a running tool loop's final turn gets it
    back when it is sent (``keep_final_thinking``).
    The same two messages always give an equal message, so a prompt that sends
    it again is byte-identical; its text is the history's (not the guard's).
    """
    earlier, later = _as_blocks(first.content), _as_blocks(second.content)
    if bound and not all(map(is_reasoning, earlier)):
        later = [b for b in later if not is_signed(b)]
    blocks = [*earlier, *later]
    leading = [b for b in blocks if _leads(b)]
    content = [*leading, *(b for b in blocks if not _leads(b))]
    joined = [*_joined_ids(first), *_joined_ids(second)]
    return second.model_copy(
        update={
            "content": content,
            "additional_kwargs": {
                **first.additional_kwargs,
                **second.additional_kwargs,
                MARKER_KEY: {"kind": "merged", "ids": joined},
            },
        }
    )


def _as_blocks(content: str | list[str | dict[str, Any]]) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def _leads(block: object) -> bool:
    """A reasoning block a joined message puts first: not an OpenAI item.

    The Responses API requires each ``reasoning`` item to be followed by the
    item it was produced with, so those stay where they are.
    """
    return is_reasoning(block) and not is_reasoning_item(block)


def _joined_ids(message: BaseMessage) -> list[str | None]:
    """The ids ``message`` stands for: its marker's if it was joined already."""
    mark = message.additional_kwargs.get(MARKER_KEY)
    if isinstance(mark, dict) and mark.get("kind") == "merged":
        return list(mark.get("ids", ()))
    return [message.id]
