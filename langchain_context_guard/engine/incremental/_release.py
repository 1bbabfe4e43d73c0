"""After a pruning: let go of the rewrites of messages cut long before.

A pruning keeps the steps of its passes (``_run.Record``) so that the next
one grows them from the new messages alone. Their lists hold every message as
each pass rewrote it (deduplicated, truncated, compressed copies): about the
history's own size again, kept for messages that were cut many prunings ago.

Those are never read again while the passes grow: a step only reads its new
messages and the places a boundary crossed (a compression batch, reasoning to
strip, the cut), and the cut only moves on. So once the trim has dropped a
message with a full budget's worth of messages after it (as small as
compression can make them: a later cut cannot keep it), its rewrites are
replaced, in copies of the record's lists, by the original the caller holds
anyway, and the memo (``_messages.memo_rewrite``) forgets them. Places, lengths
and everything carried by identity stay as they were: per-message costs and
kinds, token totals. A step that would read an emptied place after all raises
``_steps.HeadForgotten`` (``Step.stale`` says how far they go) and the pruning
runs afresh: the output is the same either way (``tests/engine/test_forget.py``).

Only assistant messages and tool results with an id are emptied: the note
digest reads dropped messages back by id, system and user messages may be kept
whatever the cut, and an empty one counts in what hygiene adds. A turns digest
reads the dropped turns as the passes rewrote them, newest first: the budget is
counted back from the first it read instead, if earlier.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._messages import forget_rewrites, marker
from ..passes._trim import Trimmed
from ._digest_step import read_from
from ._order import PASSES
from ._record import Record
from ._steps import Step

_TRIM = PASSES.index("trim")
_DIGEST = PASSES.index("digest")
CHUNK = 1_024
"""Messages the frontier must move on before the record is copied again."""


def forget_head(
    record: Record, budget: int, chunk: int = CHUNK, counter: Any = None
) -> Record:
    """``record`` without the rewrites of messages no later cut can keep.

    ``counter``: its counts of them by content are dropped too, if it can
    (``TiktokenCounter.forget``).
    """
    upto = _frontier(record, budget)
    if upto - record.forgot < chunk:
        return record
    found = forget_rewrites(record.original[record.forgot : upto])
    forget = getattr(counter, "forget", None)
    if forget is not None:
        forget(rewrite for rewrite, _ in found.values())
    back = {key: o for key, (_, o) in found.items() if _emptiable(o)}
    if not back:
        return replace(record, forgot=upto)
    last = record.original[upto - 1]
    lists: dict[int, tuple[list[BaseMessage], int]] = {}  # by id: copy, stale
    for step in record.steps:
        _emptied(step.result, step.stale, last, back, lists)
    for value in record.memo.values():  # lists of earlier runs too
        for held in value if isinstance(value, tuple) else ():
            if isinstance(held, list) and held and isinstance(held[0], BaseMessage):
                _emptied(held, 0, last, back, lists)
    steps = tuple(_restaled(step, lists) for step in record.steps)
    memo = {name: _moved(value, lists) for name, value in record.memo.items()}
    return replace(record, steps=steps, memo=memo, forgot=upto)


def _emptiable(message: BaseMessage) -> bool:
    """Whether a rewrite of ``message`` may give its place to it (module doc)."""
    return (
        isinstance(message, AIMessage | ToolMessage)
        and bool(message.id and message.content)
        and marker(message) is None
    )


def _frontier(record: Record, budget: int) -> int:
    """How many first messages of the original no later cut can keep.

    Counted back from the first message the trim kept (or the first a turns
    digest read, ``Digested.read_from``: a later one reads from there or after),
    by each message's cost once compressed (``_trim_sizes.Costs``: the least it
    can take), until a budget is full; mapped to the original by the messages
    repair added or sanitize left out (conservatively: earlier), and back to
    just after a tool result with an id (``_emptied`` finds it in each list).
    """
    if len(record.steps) <= _TRIM:
        return 0
    trim = record.steps[_TRIM]
    state = trim.state
    held = record.memo.get("costs")
    if not isinstance(state, Trimmed) or not state.dropped or held is None:
        return 0
    costs = held[1]
    if len(costs) != len(trim.source):
        return 0
    first = max(state.plan.units[state.dropped - 1]) + 1
    digest = record.steps[_DIGEST] if len(record.steps) > _DIGEST else None
    read = read_from(digest) if digest is not None and digest.kind == "digest" else None
    if read is not None:  # the turns digest weighs dropped turns from there
        first = min(first, read)
    room, at = budget, min(first, len(costs))
    while at > 0 and room > 0:
        at -= 1
        room -= costs[at][1]
    if room > 0:
        return 0
    at -= max(len(trim.source) - len(record.original), 0)
    original = record.original
    while at > record.forgot and not (
        isinstance(original[at - 1], ToolMessage) and original[at - 1].id
    ):
        at -= 1
    return max(at, 0)


def _emptied(
    messages: list[BaseMessage],
    stale: int,
    last: BaseMessage,
    back: dict[int, BaseMessage],
    lists: dict[int, tuple[list[BaseMessage], int]],
) -> None:
    """A copy of ``messages`` with rewrites in ``back`` replaced, into ``lists``.

    From ``stale`` (emptied before) through ``last``'s place: the last message
    let go of, a tool result. A cost recomputed after it
    (``_trim_units.remap_at``) reads back to the previous result and no further.
    Its place is found by id (rewrites keep it); a list without it is left as
    it is.
    """
    if id(messages) in lists:
        return
    end = next(
        (
            i + 1
            for i in range(stale, len(messages))
            if messages[i].id == last.id and isinstance(messages[i], ToolMessage)
        ),
        stale,
    )
    if end == stale:
        lists[id(messages)] = (messages, stale)
        return
    copy = list(messages)
    for i in range(stale, end):
        copy[i] = back.get(id(copy[i]), copy[i])
    lists[id(messages)] = (copy, end)


def _restaled(step: Step, lists: dict[int, tuple[list[BaseMessage], int]]) -> Step:
    source = lists.get(id(step.source), (step.source, 0))[0]
    result, stale = lists[id(step.result)]
    if step.result is step.source:
        source = result
    return replace(step, source=source, result=result, stale=stale)


def _moved(value: Any, lists: dict[int, tuple[list[BaseMessage], int]]) -> Any:
    """A memo value with the lists it holds replaced by their copies."""
    if isinstance(value, tuple):
        return tuple(
            lists[id(v)][0] if isinstance(v, list) and id(v) in lists else v
            for v in value
        )
    return value
