"""Pass 1: drop malformed tool calls, blank-id tool results and empty messages."""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    ToolCall,
    ToolMessage,
)

from .._messages import is_empty, map_messages, memo_rewrite
from .._tool_calls import first_calls, without_tool_calls

TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,127}$|^[A-Za-z0-9_-]{1,128}$")
"""Tool names some provider accepts: a call to a tool with such a name was
declared to that provider, which checked the name then. OpenAI takes
``^[a-zA-Z0-9_-]{1,64}$``, Anthropic ``^[a-zA-Z0-9_-]{1,128}$``, Gemini a
letter or underscore, then letters, digits, ``_ . : -`` (``mcp.read:file``).
Refused: a name no provider would have declared (blank, spaces, slashes,
too long)."""
INVALID_CALL_NOTE = (
    "[Tool call {name} was not run: {why}. Call it again with valid arguments.]"
)
"""What the model reads in place of an invalid tool call it made."""
_WHY = "its arguments were malformed or truncated"


def _why(error: object) -> str:
    """The first line of a call's parse error, kept short."""
    line = str(error or "").strip().splitlines()
    text = line[0].rstrip(" .:") if line else ""
    return text[:157] + "..." if len(text) > 160 else text or _WHY


def with_invalid_call_notes(
    message: AIMessage, calls: Sequence[InvalidToolCall]
) -> AIMessage:
    """``message`` saying, in text, that the invalid ``calls`` were not run.

    The calls themselves cannot be sent (they need results a provider would
    pair with them); a note keeps the model from thinking they ran.
    """
    notes = [
        INVALID_CALL_NOTE.format(
            name=c.get("name") or "(unnamed)", why=_why(c.get("error"))
        )
        for c in calls
    ]
    if not notes:
        return message
    content = message.content
    if isinstance(content, str):
        content = "\n\n".join([*([content] if content.strip() else []), *notes])
    else:
        content = [*content, *({"type": "text", "text": n} for n in notes)]
    return message.model_copy(update={"content": content})


def _valid(call_id: str, name: object, seen: set[str]) -> bool:
    return bool(call_id) and call_id not in seen and bool(TOOL_NAME.match(str(name)))


def _bad_raw_ids(message: AIMessage, kept_ids: set[str]) -> set[str]:
    """Ids of raw calls (``tool_use`` blocks, ``additional_kwargs``) to drop."""
    bad: set[str] = set()
    content = message.content
    blocks = content if isinstance(content, list) else []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") in {"tool_use", "tool_call"}:
            call_id = str(block.get("id") or "").strip()
            if call_id not in kept_ids and not _valid(
                call_id, block.get("name"), set()
            ):
                bad.add(str(block.get("id") or ""))
    raw = message.additional_kwargs.get("tool_calls")
    for call in raw if isinstance(raw, list) else []:
        if isinstance(call, dict) and not str(call.get("id") or "").strip():
            bad.add(str(call.get("id") or ""))
    return bad


def _clean_ai(message: AIMessage) -> AIMessage | None:
    message = first_calls(message)
    kept: list[ToolCall] = []
    seen: set[str] = set()
    for call in message.tool_calls:
        call_id = (call.get("id") or "").strip()
        if _valid(call_id, call.get("name") or "", seen) and isinstance(
            call.get("args"), dict
        ):
            kept.append(call)
        seen.add(call_id)
    kept_ids = {c["id"] or "" for c in kept}
    bad_raw = _bad_raw_ids(message, kept_ids)
    if (
        len(kept) == len(message.tool_calls)
        and not message.invalid_tool_calls
        and not bad_raw
    ):
        return message
    dropped = {c.get("id") or "" for c in message.tool_calls}
    dropped |= {c.get("id") or "" for c in message.invalid_tool_calls}
    cleaned = without_tool_calls(message, (dropped - kept_ids) | bad_raw)
    cleaned = cleaned.model_copy(update={"tool_calls": kept, "invalid_tool_calls": []})
    cleaned = with_invalid_call_notes(cleaned, message.invalid_tool_calls)
    return None if is_empty(cleaned) else cleaned


def sanitize_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Drop what providers reject outright.

    Removes tool calls with a blank id, a name providers refuse, arguments that are
    not an object, or a repeated id (within one message the first is kept, in
    ``tool_calls``, ``tool_use`` blocks and raw calls alike); every
    ``invalid_tool_calls`` entry (it would reach the provider unanswered), leaving
    a note of its name and why it was invalid (``INVALID_CALL_NOTE``); tool
    results with a blank ``tool_call_id``; and messages left with nothing to send.
    Dropped calls also leave the raw forms integrations send: Anthropic
    ``tool_use`` content blocks and ``additional_kwargs["tool_calls"]`` (whose
    blank-id entries go too).
    """
    return map_messages(messages, clean_message)


def clean_message(message: BaseMessage) -> BaseMessage | None:
    """One message as ``sanitize_messages`` leaves it (None: dropped).

    An assistant message's verdict is memoised (it reads every tool call, and
    a cleaned copy must be the same object on every call); the others' take a
    look at one field, and are not kept (an entry per message would hold more
    memory than the history's own field dicts).
    """
    if isinstance(message, AIMessage):
        new = memo_rewrite(message, "sanitize", _verdict)
    else:
        new = _verdict(message)
    return None if new is _DROP else new


_DROP = HumanMessage("")
"""Stands for "drop this message" in the per-message verdict cache."""


def _verdict(message: BaseMessage) -> BaseMessage:
    new: BaseMessage | None = message
    if isinstance(message, AIMessage):
        new = _clean_ai(message)
        if new is not None and is_empty(new):
            new = None
    elif isinstance(message, ToolMessage):
        if not (message.tool_call_id or "").strip():
            new = None
    elif is_empty(message):
        new = None
    return _DROP if new is None else new
