"""Reading a history that grows the one a guard read last, without copying it.

A warm call's history is the previous call's plus a few messages. Only those
are checked, converted and counted (``_extends`` says how the rest is known
unchanged); and the guard keeps the history without copying it: the caller's
list serves during the call (it may change after it), and what is kept for the
next call is the previous call's own list with the new messages appended
(``_anchor.Known``: each record says how many of its messages are its history,
and what a list held is never changed). At 50,000 messages a copy, and freeing
the previous one, touch every message, and give the collector one more young
list to traverse when a pass lands in the call (docs/design/warm-calls.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from operator import is_
from typing import Any

from langchain_core.messages import BaseMessage

from .._errors import InvalidInputError
from .._input import to_messages
from .._messages import same_message
from ..tokens._anchor import Known, full_scan
from ._extends import (
    edited_in_place,
    equal_values,
    extends_kept,
    extends_unchanged,
    more_contents,
    more_fields,
    recent_contents,
    recent_fields,
)

Read = tuple[list[BaseMessage], Known | None, list[Any] | None, list[BaseMessage]]
"""The history, the last one read if it grows that (else None), its
``recent_contents`` if it is an equal copy of it (else None), and the list the
guard keeps it in (the history is its first ``len(history)`` messages)."""


def read(last: Known, messages: Any, lock: threading.Lock) -> Read:
    """``to_messages``, reading only what follows ``last``'s history.

    A list that extends the last one read (``extends_unchanged``), or an
    equal copy of it (rebuilt from a checkpoint), only has its new items
    checked and converted. ``last``'s list is appended to only if no other
    call did so first (under ``lock``); else the kept list is a copy.
    """
    n = last.size
    if not isinstance(messages, list) or len(messages) < n or not n:
        return _whole(messages)
    seen, rebuilt, head = last.history(), None, None
    if last.fields is None:
        same = extends_unchanged(messages, seen, last.contents)
    else:
        same = extends_kept(messages, seen, last.fields, last.contents)
    if not same:
        if edited_in_place(messages, seen, last.contents):
            return _whole(messages)
        head = messages[:n]
        rebuilt = equal_values(head, seen)
        if rebuilt is None:
            if not all(map(same_message, head, seen)):
                return _whole(messages)
            rebuilt = recent_contents(head)
    try:
        new = to_messages(messages[n:])
    except InvalidInputError:  # its error names the right index
        return _whole(messages)
    if head is not None:  # equal copies: kept as they are
        head.extend(new)
        return head, last, rebuilt, head
    with lock:
        grown = len(last.messages) == n
        if grown:
            last.messages.extend(new)
    # Another call may have appended to that list since: its first n only.
    kept = last.messages if grown else [*last.messages[:n], *new]
    if all(map(is_, new, messages[n:])):
        return messages, last, None, kept  # the caller's list: read, not changed
    return kept[: n + len(new)], last, None, kept


def _whole(messages: Any) -> Read:
    original = to_messages(messages)
    return original, None, None, original


def update_known(
    known: Known | None,
    original: list[BaseMessage],
    rebuilt: list[Any] | None,
    kept: list[BaseMessage],
    count: Callable[[BaseMessage], int],
) -> Known:
    """What a guard keeps of the history ``read`` gave: list, recent items, scan.

    Grown from ``known``'s when the history grows that one (only the new
    messages are counted and read), else found afresh.
    """
    if known is None:
        scan = full_scan(original, count)
        contents, fields = recent_contents(original), recent_fields(original)
    else:
        new = original[known.size :]
        scan = known.grow(original, count)
        if rebuilt is not None or known.fields is None:
            previous = known.contents if rebuilt is None else rebuilt
            contents, fields = more_contents(previous, new), recent_fields(original)
        else:
            contents = more_contents(known.contents, new)
            fields = more_fields(known.fields, new)
    return Known(
        kept,
        contents,
        body=scan.body,
        usage_at=scan.usage_at,
        usage_body=scan.usage_body,
        calls=scan.calls,
        replied=scan.replied,
        size=len(original),
        fields=fields,
    )
