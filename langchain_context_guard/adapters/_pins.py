"""Pins the agent's model asks for: the ``pin_message`` and ``unpin_message`` tools.

``make_pin_tools`` gives the model two tools that pin or release a message of
its own conversation, named by the tool call id of a result (the id the model
gave the call, and the one the guard's pointers name) or by a message id. Each
returns a ``Command`` that replaces the message in the agent's state with a
pinned (or released) copy (``engine.pin_update``: ``add_messages`` replaces by
id), so the pin is checkpointed with the history and never reaches another
thread. ``ContextGuardMiddleware(pin_tools=True)`` adds them to an agent.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import InjectedState
from langgraph.types import Command

from ..engine import (
    InvalidInputError,
    find_message,
    is_pinned,
    pin_update,
    text_of,
)

PIN_TOOL, UNPIN_TOOL = "pin_message", "unpin_message"
"""The tools' names."""
MAX_PINS = 8
"""Messages the model may hold pinned at once, by default."""


def make_pin_tools(max_pins: int = MAX_PINS) -> list[BaseTool]:
    """The ``pin_message`` and ``unpin_message`` tools for a LangGraph agent.

    ``max_pins``: how many messages the model may hold pinned at once; a pin
    beyond it is refused with a note to release one first (pins count against
    the context budget).
    """

    def pin_message(
        message_id: str,
        state: Annotated[Any, InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> Command[Any]:
        messages = _messages(state)
        held = sum(map(is_pinned, messages))
        found = find_message(messages, message_id)
        if found is not None and not is_pinned(found) and held >= max_pins:
            return _answer(
                tool_call_id,
                f"Not pinned: {held} messages are pinned already (at most "
                f"{max_pins}). Release one with {UNPIN_TOOL} first.",
            )
        return _apply(messages, message_id, tool_call_id, release=False)

    def unpin_message(
        message_id: str,
        state: Annotated[Any, InjectedState],
        tool_call_id: Annotated[str, InjectedToolCallId],
    ) -> Command[Any]:
        return _apply(_messages(state), message_id, tool_call_id, release=True)

    return [
        StructuredTool.from_function(
            pin_message,
            name=PIN_TOOL,
            description="Keep one earlier message verbatim in your context: it "
            "is never shortened, summarised or dropped while pinned, and counts "
            "against your context budget. `message_id`: the tool call id of the "
            "result to keep (the id of your call), or a message id. Release it "
            f"with {UNPIN_TOOL} once you no longer need it.",
        ),
        StructuredTool.from_function(
            unpin_message,
            name=UNPIN_TOOL,
            description="Release a message pinned with pin_message: it may then "
            "be shortened or dropped like the rest. `message_id`: the id given "
            "to pin_message.",
        ),
    ]


def _messages(state: Any) -> list[BaseMessage]:
    value = state.get("messages") if isinstance(state, dict) else state.messages
    return list(value or [])


def _apply(
    messages: list[BaseMessage], ref: str, tool_call_id: str, *, release: bool
) -> Command[Any]:
    """The state update for one pin or release, with the tool's answer."""
    try:
        update: list[BaseMessage] = pin_update(messages, [ref], release=release)[
            "messages"
        ]
    except InvalidInputError as error:
        return _answer(tool_call_id, f"Error: {error}", error=True)
    found = find_message(messages, ref)
    chars = len(text_of(found.content)) if found is not None else 0
    if release:
        text = f"Released {ref}: it may be shortened or dropped like the rest."
    else:
        text = (
            f"Pinned {ref} ({chars:,} characters): it stays verbatim in your "
            f"context and counts against it until you call {UNPIN_TOOL}."
        )
    return Command(update={"messages": [*update, _result(tool_call_id, text)]})


def _answer(tool_call_id: str, text: str, *, error: bool = False) -> Command[Any]:
    return Command(update={"messages": [_result(tool_call_id, text, error=error)]})


def _result(tool_call_id: str, text: str, *, error: bool = False) -> ToolMessage:
    return ToolMessage(
        text, tool_call_id=tool_call_id, status="error" if error else "success"
    )
