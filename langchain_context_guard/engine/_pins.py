"""Pins: messages the application or the model keeps verbatim in the prompt.

A pin is a mark on the message itself (``MARKER_KEY``: ``{"kind": "kept_whole",
"pinned": True}``), so it lives wherever the history lives (a checkpoint, a
store) and never reaches another conversation. A pinned message is never
truncated, compressed or superseded (it is ``kept_whole``), never dropped by the
trim (with its tool call and all that call's results: ``_trim_units.hold_pins``)
and kept verbatim after a compaction summary. It counts against the budget like
any message; when the pinned messages and what must be kept anyway do not fit,
``BudgetExceededError`` says so and names the fix (unpin).

``pin`` and ``unpin`` return copies; ``pin_update`` gives the state update that
pins or releases messages of a LangGraph state by id (``add_messages`` replaces
a message by its id).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ._errors import InvalidInputError
from ._messages import (
    APP_MESSAGE,
    MARKER_KEY,
    is_app_message,
    is_pinned,
    marker,
    with_marker,
)

PIN_HINT = (
    "pass the id of a message in the history (message.id), or the tool_call_id "
    "of a tool result."
)


def pin(message: BaseMessage) -> BaseMessage:
    """A copy of ``message`` marked pinned (``message`` itself if it already is).

    Raises:
        InvalidInputError: ``message`` is one the guard wrote or shortened (a
            summary, a truncated result): pin the original instead.
    """
    if is_pinned(message):
        return message
    mark = marker(message)
    app = is_app_message(message)
    if mark is not None and mark.get("kind") != "kept_whole" and not app:
        raise InvalidInputError(
            f"Cannot pin a message marked {mark.get('kind')!r} by the guard.",
            hint="pin the conversation's own message (the original, not a "
            "summary or a shortened copy).",
        )
    if app:
        return with_marker(message, "kept_whole", pinned=True, **{APP_MESSAGE: True})
    return with_marker(message, "kept_whole", pinned=True)


def unpin(message: BaseMessage) -> BaseMessage:
    """A copy of ``message`` without its pin (``message`` itself if not pinned)."""
    if not is_pinned(message):
        return message
    if is_app_message(message):
        return with_marker(message, APP_MESSAGE)
    kwargs = {k: v for k, v in message.additional_kwargs.items() if k != MARKER_KEY}
    return message.model_copy(update={"additional_kwargs": kwargs})


def find_message(messages: Sequence[BaseMessage], ref: str) -> BaseMessage | None:
    """The message whose id is ``ref``, else the tool result answering call ``ref``."""
    for message in messages:
        if message.id == ref:
            return message
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id == ref:
            return message
    return None


def pin_update(
    messages: Sequence[BaseMessage], refs: Iterable[str], *, release: bool = False
) -> dict[str, Any]:
    """The LangGraph state update that pins (``release``: unpins) messages by id.

    ``refs``: message ids, or tool call ids of tool results. Returns
    ``{"messages": [copies]}``: ``add_messages`` replaces each message by its id,
    so ``graph.update_state(config, pin_update(...))`` or a node's return value
    pins them in the checkpointed history.

    Raises:
        InvalidInputError: a ref names no message of ``messages``, or the
            message has no id to be replaced by.
    """
    out: list[BaseMessage] = []
    for ref in refs:
        found = find_message(messages, ref)
        if found is None or not found.id:
            what = "no message" if found is None else "a message without an id"
            raise InvalidInputError(f"{ref!r} names {what} to pin.", hint=PIN_HINT)
        new = unpin(found) if release else pin(found)
        if new is not found:
            out.append(new)
    return {"messages": out}


def count_pinned(
    messages: Iterable[BaseMessage], count: Callable[[BaseMessage], int]
) -> tuple[int, int]:
    """How many of ``messages`` are pinned, and their tokens by ``count``."""
    held = [m for m in messages if is_pinned(m)]
    return len(held), sum(map(count, held))
