"""Reading what callers pass as a history, with errors that say where."""

from __future__ import annotations

import json
from collections.abc import Iterable
from itertools import repeat
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.messages.tool import invalid_tool_call

from ._errors import InvalidInputError


def to_messages(messages: Any) -> list[BaseMessage]:
    """Read anything ``convert_to_messages`` accepts, with errors that say where."""
    if (
        messages is None
        or isinstance(messages, str | bytes | dict | BaseMessage)
        or (isinstance(messages, tuple) and _is_pair(messages))
        or not isinstance(messages, Iterable)
    ):
        raise InvalidInputError(
            f"Expected a sequence of messages, got {type(messages).__name__}.",
            hint="pass a list, and wrap a single message in one: prepare([message]).",
        )
    if isinstance(messages, list) and all(
        map(isinstance, messages, repeat(BaseMessage))
    ):
        return list(messages)
    out: list[BaseMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        if item is None:
            raise InvalidInputError(f"Message {i} is None.", index=i)
        if isinstance(item, dict) and item.get("content", "") is None:
            item = {**item, "content": ""}
        bad: list[dict[str, Any]] = []
        if isinstance(item, dict):
            _check_calls(item, i)
            item, bad = _split_unreadable_calls(item)
        try:
            read = convert_to_messages([item])
            if bad and read and isinstance(read[0], AIMessage):
                read[0] = _with_invalid(read[0], bad)
            out.extend(read)
        except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InvalidInputError(
                f"Message {i} cannot be read ({first}).", index=i
            ) from None
    return out


def _is_pair(value: tuple[Any, ...]) -> bool:
    """A bare ``(role, content)`` tuple passed where a list of messages belongs."""
    return len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], str)


def _check_calls(item: dict[str, Any], index: int) -> None:
    """Refuse a ``tool_calls`` field that is not a list of dicts (or None)."""
    calls = item.get("tool_calls")
    if calls is None:
        return
    if not isinstance(calls, list):
        got = type(calls).__name__
    else:
        odd = [type(c).__name__ for c in calls if not isinstance(c, dict)]
        if not odd:
            return
        got = f"a list holding {odd[0]}"
    raise InvalidInputError(
        f"Message {index} has a 'tool_calls' field that is {got}.",
        index=index,
        hint="make 'tool_calls' a list of dicts, each like {'id': ..., 'type': "
        "'function', 'function': {'name': ..., 'arguments': '<JSON>'}}, "
        "or leave it out.",
    )


def _split_unreadable_calls(
    item: dict[str, Any],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """An OpenAI-format message without its calls whose ``arguments`` are not JSON.

    Returns the message and those calls; they become ``invalid_tool_calls``, which
    ``sanitize_messages`` drops with an event (a model that wrote broken JSON
    must not make the whole history unreadable).
    """
    calls = item.get("tool_calls")
    if not isinstance(calls, list):
        return item, []
    bad = [c for c in calls if isinstance(c, dict) and not _readable(c)]
    if not bad:
        return item, []
    return {**item, "tool_calls": [c for c in calls if c not in bad]}, bad


def _readable(call: dict[str, Any]) -> bool:
    function = call.get("function")
    if not isinstance(function, dict):
        return True  # not OpenAI's shape: convert_to_messages decides
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        return True
    try:
        json.loads(arguments or "{}")
    except ValueError:
        return False
    return True


def _with_invalid(message: AIMessage, bad: list[dict[str, Any]]) -> AIMessage:
    invalid = [
        invalid_tool_call(
            name=str(c["function"].get("name") or ""),
            args=str(c["function"].get("arguments")),
            id=str(c.get("id") or ""),
            error="arguments are not valid JSON",
        )
        for c in bad
    ]
    return message.model_copy(
        update={"invalid_tool_calls": [*message.invalid_tool_calls, *invalid]}
    )
