"""The provider-native passes as steps: compaction blocks, bound reasoning.

``compaction_step`` grows while the new messages hold no compaction block (the
head it dropped stays dropped); a new block runs it in full. ``bound_step``
looks only from the first message the passes changed: a warm call whose prompt
is the history unchanged does nothing.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, label
from ..passes._bound_thinking import drop_stale_thinking
from ..passes._provider_compaction import (
    dropped_before_compaction,
    latest_compaction,
)
from ..passes._trim import Counter
from ._steps import HeadForgotten, Step, grown, whole


def compaction_step(
    source: list[BaseMessage], count: Counter, prev: Step | None = None
) -> Step:
    """``drop_before_compaction`` as a step."""
    if prev is not None and latest_compaction(source, len(prev.source)) is None:
        return grown(prev, source, source[len(prev.source) :], NO_EDITS, 0, None)
    gone = dropped_before_compaction(source)
    if not gone:
        return whole("provider_compaction", source, source, NO_EDITS, 0, None)
    dropped = set(gone)
    out = [m for i, m in enumerate(source) if i not in dropped]
    edits = Edits(removed=tuple(label(source[i], i) for i in gone))
    delta = -sum(count(source[i]) for i in gone)
    return whole("provider_compaction", source, out, edits, delta, None)


def bound_step(
    source: list[BaseMessage],
    produced: list[BaseMessage],
    start: int,
    count: Counter,
    stale: int,
) -> Step:
    """``drop_stale_thinking(source, produced)``; ``start``: the first changed place.

    Run in full on every call, but from ``start`` on: nothing when the prompt
    is ``produced`` (the history as read, or what was sent and the new messages).
    """
    if start >= len(source) or start == NONE:
        return Step("bound_thinking", source, source, NO_EDITS, 0, NONE, stale=stale)
    out = drop_stale_thinking(source, produced, start)
    if out is source:
        return Step("bound_thinking", source, source, NO_EDITS, 0, NONE, stale=stale)
    changed = [i for i in range(start, len(out)) if out[i] is not source[i]]
    if changed[0] < stale:
        raise HeadForgotten  # it changed places ``_release`` emptied
    delta = sum(count(out[i]) - count(source[i]) for i in changed)
    edits = Edits(changed=tuple(label(out[i], i) for i in changed))
    return Step("bound_thinking", source, out, edits, delta, changed[0], stale=stale)
