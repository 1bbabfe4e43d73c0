"""Small helpers over LangChain messages shared by the passes."""

from __future__ import annotations

import sys
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Sequence
from itertools import islice
from operator import attrgetter
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

M = TypeVar("M", bound=BaseMessage)

MARKER_KEY = "context_guard"
"""``additional_kwargs`` key on every message this library creates or rewrites.

Its value is a dict with at least ``kind`` (``"truncated"``, ``"compressed"``,
``"synthetic_result"``, ``"summary"``, ``"digest"``, ``"placeholder"``, ...);
``"kept_whole"`` is set by a caller on a message no pass may shorten; with
``"pinned": True`` (``_pins.pin``) the trim and compaction keep it too.
"""


def marker(message: BaseMessage) -> dict[str, Any] | None:
    """The guard's marker on a message, if it has one."""
    value = message.additional_kwargs.get(MARKER_KEY)
    return value if isinstance(value, dict) else None


def without_usage(message: BaseMessage) -> BaseMessage:
    """A kept reply whose ``usage_metadata`` no longer describes its prompt, dropped.

    The copy says so in its ``response_metadata`` (never sent to a provider), so
    the guard does not take it for a reply that reported no usage.
    """
    if not isinstance(message, AIMessage) or not message.usage_metadata:
        return message
    cleared = {**message.response_metadata, MARKER_KEY: {"usage": "cleared"}}
    return message.model_copy(
        update={"usage_metadata": None, "response_metadata": cleared}
    )


def usage_cleared(message: BaseMessage) -> bool:
    """Whether ``without_usage`` dropped ``message``'s usage."""
    mark = message.response_metadata.get(MARKER_KEY)
    return isinstance(mark, dict) and mark.get("usage") == "cleared"


def kept_whole(message: BaseMessage) -> bool:
    """Whether ``message`` is marked ``"kept_whole"``: never truncated or compressed.

    A caller marks the results it wants sent in full (``ContextGuardMiddleware``'s
    ``exclude_tools``); the trim may still drop their whole turn.
    """
    mark = marker(message)
    return mark is not None and mark.get("kind") == "kept_whole"


def is_pinned(message: BaseMessage) -> bool:
    """Whether ``message`` is pinned: kept whole, and never dropped or summarised."""
    mark = marker(message)
    return (
        mark is not None
        and mark.get("kind") == "kept_whole"
        and bool(mark.get("pinned"))
    )


def is_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is a compaction summary made by this library."""
    mark = marker(message)
    return mark is not None and mark.get("kind") == "summary"


def is_user(message: BaseMessage) -> bool:
    """A real user turn: a human message the guard did not write.

    Not one of our summaries, digests or placeholder first turns (so a prepared
    output splits into the same turns as the history it came from).
    """
    if not isinstance(message, HumanMessage):
        return False
    mark = marker(message)
    return mark is None or mark.get("kind") not in {"summary", "digest", "placeholder"}


def running_turn_start(messages: Sequence[BaseMessage]) -> int:
    """Index from which messages belong to an unfinished tool-use turn.

    The turn is unfinished (a running tool loop) when the last message that is
    not a tool result is an assistant message with tool calls: its results are
    in, or on their way, and the model has not answered yet. The turn starts at
    the last real user message (``is_user``); ``len(messages)`` when no turn is
    running. Anthropic requires the loop's final assistant message to keep the
    reasoning it started with.
    """
    last = next((m for m in reversed(messages) if not isinstance(m, ToolMessage)), None)
    if not (isinstance(last, AIMessage) and last.tool_calls):
        return len(messages)
    for i in range(len(messages) - 1, -1, -1):
        if is_user(messages[i]):
            return i
    return 0


def final_tool_turn(messages: Sequence[BaseMessage]) -> int:
    """Index of a running tool loop's final assistant message, else ``len``.

    The last message that is not a tool result, when it is an assistant message
    with tool calls. Every Claude model with thinking on requires it to start
    with the thinking block it was produced with.
    """
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if not isinstance(message, ToolMessage):
            if isinstance(message, AIMessage) and message.tool_calls:
                return i
            break
    return len(messages)


def is_reasoning_item(block: object) -> bool:
    """An OpenAI Responses ``reasoning`` item kept as a content block.

    It has an ``rs_`` id, a ``summary`` or ``encrypted_content``; the API
    requires the item produced after it (a message or function call) to follow
    it, and rejects that item without it while the item keeps its id.
    """
    if not isinstance(block, dict) or block.get("type") != "reasoning":
        return False
    return (
        str(block.get("id") or "").startswith("rs_")
        or "summary" in block
        or "encrypted_content" in block
    )


def text_of(content: str | list[Any]) -> str:
    """Plain text of message content (text blocks joined by newlines)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "\n".join(parts)


def is_empty(message: BaseMessage) -> bool:
    """True for a message with no content and nothing else to send."""
    if isinstance(message, AIMessage) and (
        message.tool_calls or message.invalid_tool_calls
    ):
        return False
    if isinstance(message, ToolMessage):
        return False
    content = message.content
    if isinstance(content, str):
        return not content.strip()
    return not any(
        not isinstance(b, str) or b.strip()
        for b in content
        if not (isinstance(b, dict) and b.get("type") == "text" and not b.get("text"))
    )


def original_size(message: BaseMessage, text: str) -> tuple[int, int]:
    """Characters and lines ``message`` had before the guard first cut it.

    ``text`` is its text now; a message the guard has not cut (or whose marker
    predates line counts) gives the size of ``text`` for what is not recorded.
    A marker names what the guard replaced, never a cut of a cut.
    """
    mark = marker(message) or {}
    chars, lines = mark.get("original_chars"), mark.get("original_lines")
    if not isinstance(chars, int) or chars <= len(text):
        return len(text), text.count("\n") + 1
    if not isinstance(lines, int):
        lines = text.count("\n") + 1
    return chars, lines


def with_marker(
    message: BaseMessage, kind: str, *, content: Any = None, **info: Any
) -> BaseMessage:
    """A copy of ``message`` with new content (optional) and the guard's marker."""
    update: dict[str, Any] = {
        "additional_kwargs": {
            **message.additional_kwargs,
            MARKER_KEY: {"kind": kind, **info},
        }
    }
    if content is not None:
        update["content"] = content
    return message.model_copy(update=update)


def label(message: BaseMessage, index: int) -> str:
    """How events name a message: its id, else its position."""
    return message.id or f"#{index}"


def map_messages(
    messages: Sequence[BaseMessage],
    fn: Callable[[BaseMessage], BaseMessage | None],
) -> list[BaseMessage]:
    """``fn`` on every message (None drops it); the input list if nothing changed."""
    out: list[BaseMessage] = []
    changed = False
    for message in messages:
        new = fn(message)
        if new is not message:
            changed = True
        if new is not None:
            out.append(new)
    if changed:
        return out
    return messages if isinstance(messages, list) else list(messages)


NONE = sys.maxsize
"""``first_diff`` of two lists holding the same objects."""


def first_diff(out: Sequence[BaseMessage], source: Sequence[BaseMessage]) -> int:
    """The first index at which ``out`` and ``source`` hold different objects."""
    for i, (a, b) in enumerate(zip(out, source, strict=False)):
        if a is not b:
            return i
    return NONE if len(out) == len(source) else min(len(out), len(source))


def same_list(before: Sequence[BaseMessage], after: list[BaseMessage]) -> bool:
    """Whether two histories hold the very same message objects in order."""
    return len(before) == len(after) and all(
        a is b for a, b in zip(before, after, strict=True)
    )


_Memo = tuple[Any, Any, dict[Hashable, BaseMessage | None]]
_rewrites: dict[int, _Memo] = {}
"""By message identity: a weak reference, the content object, and each
rewrite by its key (``None``: unchanged). One entry per message, not one per
message and pass: a warm call leaves the garbage collector fewer new objects,
so its young collections (which traverse the caller's whole fresh history
list) come less often."""
_keys: dict[Hashable, Hashable] = {}
"""One object per distinct rewrite key (the passes build their key tuples on
every call), so an entry's dict holds no new tuple of its own."""
_KEYS_MAX = 1_024
_rewrites_lock = threading.Lock()
_SWEEP_EVERY = 4_096
_stored = [0]
"""Rewrites stored since the last sweep."""


def memo_rewrite(
    message: M, key: Hashable, build: Callable[[M], BaseMessage]
) -> BaseMessage:
    """``build(message)``, remembered while ``message`` lives and is unchanged.

    Passes rewrite the same old messages on every call; returning the very same
    rewritten object each time keeps their work (and the token count's cache
    lookups) proportional to what is new, and the output byte-identical.
    Entries hold a plain weak reference (no callback, so nothing runs at
    interpreter shutdown); dead ones are swept every 4,096 new rewrites, so the
    table holds at most that many rewrites of messages that are gone.
    """
    content = message.content
    entry = _rewrites.get(id(message))
    if entry is not None and entry[0]() is message and entry[1] is content:
        done = entry[2]
        if key in done:
            kept = done[key]
            return message if kept is None else kept
    result = build(message)
    # ``None`` stands for "unchanged": holding the message itself would keep it alive.
    kept = None if result is message else result
    if len(_keys) < _KEYS_MAX:
        key = _keys.setdefault(key, key)
    with _rewrites_lock:
        entry = _rewrites.get(id(message))
        if entry is None or entry[0]() is not message or entry[1] is not content:
            entry = _rewrites[id(message)] = (weakref.ref(message), content, {})
        entry[2][key] = kept
        _stored[0] += 1
        due = _stored[0] >= _SWEEP_EVERY
    if due:
        sweep_memo()
    return result


def forget_rewrites(
    messages: Iterable[BaseMessage],
) -> dict[int, tuple[BaseMessage, BaseMessage]]:
    """Drop the memo's entries of ``messages`` and of their rewrites, in turn.

    Returns each rewrite dropped, by identity, with the message of ``messages``
    it was made from (``_release``).
    """
    back: dict[int, tuple[BaseMessage, BaseMessage]] = {}
    with _rewrites_lock:
        for message in messages:
            todo = [message]
            while todo:
                entry = _rewrites.pop(id(todo.pop()), None)
                if entry is None or entry[0]() is None:
                    continue
                for kept in entry[2].values():
                    if kept is not None and id(kept) not in back:
                        back[id(kept)] = (kept, message)
                        todo.append(kept)
    return back


def drop_oldest(table: dict[Any, Any], keep: int) -> None:
    """Drop ``table``'s oldest entries (insertion order) until ``keep`` are left."""
    for slot in list(islice(table, max(len(table) - keep, 0))):
        del table[slot]


def sweep_dead(table: dict[Any, tuple[Any, ...]]) -> int:
    """Drop entries whose weakly referenced message (item 0) is gone; how many."""
    dead = [s for s, entry in table.items() if entry[0]() is None]
    for slot in dead:
        del table[slot]
    return len(dead)


def sweep_memo() -> None:
    """Drop the rewrite memo's entries of messages that are gone.

    Until none is left: a rewrite is kept by its original's entry and may have
    an entry of its own (a later pass rewrote it), which dies with it.
    """
    with _rewrites_lock:
        while sweep_dead(_rewrites):
            pass
        _stored[0] = 0


_type = attrgetter("type")


def assistant_count(history: Sequence[BaseMessage]) -> int:
    """How many assistant messages ``history`` holds (C speed at 50,000 messages).

    A guard counts a whole history once, then only the new messages of each
    call (``_read_history.Known``).
    """
    return list(map(_type, history)).count("ai")


APP_MESSAGE = "app_message"
"""``MARKER_KEY`` kind a caller sets on a user message its own code wrote
(``app_message``): a nudge, a harness's format error, not a person's reply."""


def is_app_message(message: BaseMessage) -> bool:
    """Whether ``message`` is marked as the application's own (``APP_MESSAGE``)."""
    mark = marker(message)
    return mark is not None and (
        mark.get("kind") == APP_MESSAGE or mark.get(APP_MESSAGE) is True
    )


def _by_person(message: BaseMessage) -> bool:
    """A user message a person wrote: unmarked, or only kept whole (pinned)."""
    mark = marker(message)
    return mark is None or (
        mark.get("kind") == "kept_whole" and not is_app_message(message)
    )


def holds_reply(history: Sequence[BaseMessage], start: int = 0) -> bool:
    """Whether a user message from ``start`` on answers the assistant's answer.

    A user message right after an assistant message that made no tool call (the
    one before ``start`` included): the conversation is interactive, a person
    reads the answers and replies, not one task run to its end. The guard's own
    notes and the application's messages (marked) are not replies; a compaction
    summary of a history that held one stands for it (marked ``replied``).
    Counted once per history, then on each call's new messages
    (``_read_history.Known``).
    """
    begin = max(start, 1) - 1
    types = list(map(_type, history[begin:]))
    for j, kind in enumerate(types):
        if kind != "human":
            continue
        if (
            j
            and types[j - 1] == "ai"
            and is_reply(history[begin + j - 1], history[begin + j])
        ):
            return True
        message = history[begin + j]
        if is_summary(message) and (marker(message) or {}).get("replied"):
            return True
    return False


def is_reply(answer: BaseMessage, reply: BaseMessage) -> bool:
    """Whether ``reply``, right after ``answer``, is a person's reply to it.

    ``answer`` an assistant message that made no tool call, ``reply`` a user
    message a person wrote (``holds_reply``).
    """
    return (
        isinstance(answer, AIMessage)
        and not answer.tool_calls
        and isinstance(reply, HumanMessage)
        and _by_person(reply)
    )


def same_message(a: BaseMessage, b: BaseMessage) -> bool:
    """The same message, or an equal copy (pydantic's ``==`` without its overhead)."""
    return a is b or (
        type(a) is type(b)
        and a.id == b.id
        and a.__dict__ == b.__dict__
        and (a.__pydantic_extra__ or {}) == (b.__pydantic_extra__ or {})
    )
