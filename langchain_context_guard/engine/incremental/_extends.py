"""Whether a history is the one seen before, grown: cheap checks for warm calls.

A history extends the previous call's when its first messages are the very
objects (or equal copies, as a checkpoint rebuilds them) and the recent ones
were not edited in place; then only its new messages need reading, counting and
passing (``_steps``, ``_stable_prefix``).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import and_, attrgetter, is_, is_not, itemgetter
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


def recent_fields(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """Field dicts of the last ``RECHECKED`` messages (``extends_kept``)."""
    return list(map(vars, messages[-RECHECKED:]))


def more_fields(
    fields: list[dict[str, Any]], new: Sequence[BaseMessage]
) -> list[dict[str, Any]]:
    """``recent_fields`` of a history grown by ``new``, from its ``fields``."""
    return [*fields, *map(vars, new)][-RECHECKED:]


def extends_kept(
    longer: Sequence[BaseMessage],
    shorter: Sequence[BaseMessage],
    fields: Sequence[dict[str, Any]],
    contents: list[Any],
) -> bool:
    """``extends_unchanged``, for a ``shorter`` the guard keeps and its ``fields``.

    The edit check reads the kept messages' field dicts (``recent_fields``),
    not ``longer``'s messages: those are the very objects, or equal ones, which
    the compare already read (an equal copy edited since compares unequal).
    No attribute is looked up on a message, and the messages themselves are
    not read: 2,048 checks take about half the time. The contents are compared
    as lists (the same objects skipped at C speed; a content replaced by an
    equal one is no edit: it counts the same), a third faster than ``is`` one
    by one.
    """
    if not _same_ends(longer, shorter):
        return False
    return not shorter or (
        starts_with(longer, shorter) and list(map(_field_content, fields)) == contents
    )


def extends_unchanged(
    longer: Sequence[BaseMessage],
    shorter: Sequence[BaseMessage],
    contents: list[Any],
) -> bool:
    """Whether ``longer`` starts with the messages of ``shorter``, unchanged.

    Its first and last must be the very objects, the others the same or equal
    ones (compared at C speed: an equal copy is the same message), and the last
    ``len(contents)`` must still hold those content objects (``recent_contents``:
    not edited in place; an older message is replaced, not edited, as LangGraph's
    ``add_messages`` does).
    """
    if not _same_ends(longer, shorter):
        return False
    n = len(shorter)
    return not n or (starts_with(longer, shorter) and unedited(longer, n, contents))


def _same_ends(longer: Sequence[BaseMessage], shorter: Sequence[BaseMessage]) -> bool:
    """``longer`` is as long, and holds ``shorter``'s first and last objects there."""
    n = len(shorter)
    if len(longer) < n:
        return False
    return not n or (longer[0] is shorter[0] and longer[n - 1] is shorter[n - 1])


def edited_in_place(
    longer: Sequence[BaseMessage],
    shorter: Sequence[BaseMessage],
    contents: Sequence[Any],
) -> bool:
    """Whether one of ``shorter``'s last messages, still in ``longer``, was edited.

    The very object at the same place, with another content object than
    ``contents`` (``recent_contents(shorter)``) says: a comparison of the two
    histories by value cannot see that edit (both hold the edited object).
    """
    n, k = len(shorter), len(contents)
    if len(longer) < n or not k:
        return False
    mine, theirs = shorter[n - k : n], longer[n - k : n]
    same = map(is_, mine, theirs)  # ``theirs`` may hold what is not a message yet
    moved = map(is_not, map(_content, mine), contents)
    return any(map(and_, same, moved))


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


def unedited(messages: Sequence[BaseMessage], n: int, contents: list[Any]) -> bool:
    """Whether the messages before ``n`` still hold ``contents`` (the last ones).

    Compared as lists: the same objects are skipped at C speed, and a content
    replaced by an equal one is no edit (it counts the same).
    """
    start = n - len(contents)
    return list(map(_content, messages[start:n])) == contents


def equal_values(a: list[BaseMessage], b: list[BaseMessage]) -> list[Any] | None:
    """``recent_contents(a)`` if ``a`` and ``b`` hold equal messages, else None.

    Types, field dicts and extras are compared as lists (the same objects are
    skipped, equal values compared by ``==`` in C), with no Python call per
    message; the contents are read off the field dicts just compared. Stricter
    than ``_messages.same_message`` (an extra of ``None`` is not ``{}`` here):
    None only means that check must decide.
    """
    if len(a) != len(b) or list(map(type, a)) != list(map(type, b)):
        return None
    fields = list(map(vars, a))
    if fields != list(map(vars, b)) or list(map(_extra, a)) != list(map(_extra, b)):
        return None
    return list(map(_field_content, fields[-RECHECKED:]))
