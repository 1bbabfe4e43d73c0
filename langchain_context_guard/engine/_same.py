"""Whether a history is the one seen before, grown: cheap checks for warm calls.

A history extends the previous call's when its first messages are the very
objects (or equal copies, as a checkpoint rebuilds them) and the recent ones
were not edited in place; then only its new messages need reading, counting and
passing (``_stages``, ``_stable``).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, is_, itemgetter
from typing import Any

from langchain_core.messages import BaseMessage

_content = attrgetter("content")
_extra = attrgetter("__pydantic_extra__")
_field_content = itemgetter("content")


def extends(longer: Sequence[BaseMessage], shorter: Sequence[BaseMessage]) -> bool:
    """Whether ``longer`` starts with the very objects of ``shorter``."""
    return len(longer) >= len(shorter) and all(map(is_, longer, shorter))


RECHECKED = 2_048
"""How many of a kept history's last messages are checked for an edit in place."""


def recent_contents(messages: Sequence[BaseMessage]) -> list[Any]:
    """Content objects of the last ``RECHECKED`` messages (``extends_unchanged``)."""
    return list(map(_content, messages[-RECHECKED:]))


def more_contents(contents: list[Any], new: Sequence[BaseMessage]) -> list[Any]:
    """``recent_contents`` of a history grown by ``new``, from its ``contents``."""
    return [*contents, *map(_content, new)][-RECHECKED:]


def extends_unchanged(
    longer: Sequence[BaseMessage],
    shorter: Sequence[BaseMessage],
    contents: Sequence[Any],
) -> bool:
    """Whether ``longer`` starts with the messages of ``shorter``, unchanged.

    Its first and last must be the very objects, the others the same or equal
    ones (compared at C speed: an equal copy is the same message), and the last
    ``len(contents)`` must still hold those content objects (``recent_contents``:
    not edited in place; an older message is replaced, not edited, as LangGraph's
    ``add_messages`` does).
    """
    n = len(shorter)
    if len(longer) < n:
        return False
    if not n:
        return True
    if longer[0] is not shorter[0] or longer[n - 1] is not shorter[n - 1]:
        return False
    return starts_with(longer, shorter) and unedited(longer, n, contents)


def starts_with(longer: Sequence[BaseMessage], shorter: Sequence[BaseMessage]) -> bool:
    """``longer[:len(shorter)] == shorter``, without copying ``longer``.

    A copy touches every message (its reference count), which at 50,000
    messages costs more than the compare. For lists, ``shorter <= longer``
    compares items with ``==`` up to the first that differs, skipping the very
    same objects at C speed, and compares the lengths only when none differs;
    messages define no order, so one that differs raises ``TypeError``.
    """
    n = len(shorter)
    if len(longer) == n:
        return longer == shorter
    if not (type(longer) is list and type(shorter) is list):
        return longer[:n] == shorter
    try:
        return shorter <= longer
    except TypeError:
        return False


def unedited(messages: Sequence[BaseMessage], n: int, contents: Sequence[Any]) -> bool:
    """Whether the messages before ``n`` still hold ``contents`` (the last ones)."""
    return all(map(is_, map(_content, messages[n - len(contents) : n]), contents))


def equal_values(a: list[BaseMessage], b: list[BaseMessage]) -> list[Any] | None:
    """``recent_contents(a)`` if ``a`` and ``b`` hold equal messages, else None.

    Types, field dicts and extras are compared as lists (the same objects are
    skipped, equal values compared by ``==`` in C), with no Python call per
    message; the contents are read off the field dicts just compared. Stricter
    than ``_stable.same_message`` (an extra of ``None`` is not ``{}`` here):
    None only means that check must decide.
    """
    if len(a) != len(b) or list(map(type, a)) != list(map(type, b)):
        return None
    fields = list(map(vars, a))
    if fields != list(map(vars, b)) or list(map(_extra, a)) != list(map(_extra, b)):
        return None
    return list(map(_field_content, fields[-RECHECKED:]))
