"""Reading what callers pass as a history, with errors that say where."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

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
        try:
            out.extend(convert_to_messages([item]))
        except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InvalidInputError(
                f"Message {i} cannot be read ({first}).", index=i
            ) from None
    return out


def _is_pair(value: tuple[Any, ...]) -> bool:
    """A bare ``(role, content)`` tuple passed where a list of messages belongs."""
    return len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], str)
