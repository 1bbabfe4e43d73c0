"""The passes of ``prepare`` as steps that can grow with the history.

A step is one pass over one history: its input, its output, its edits (for the
event), its token change, and what the pass decided (the state it needs to go
on). ``ContextGuard`` keeps the steps of its last call; when the next history
extends that one (the very same message objects, then new ones), each pass grows
its previous step from the new messages alone, unless something it decides on
moved (a compression batch, the trim cut, ...): then it runs in full. Either way
a step equals what a fresh run gives (``tests/test_incremental.py``), so a warm
call costs what is new rather than the whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .._events import NO_EDITS, Edits, EventKind
from .._messages import NONE, first_diff, label
from ..passes._compress import compress_boundary, with_callers
from ..passes._hygiene import history_start, tidy_message, tidy_part
from ..passes._repair import repair_part
from ..passes._trim import Counter

_content = attrgetter("content")
Each = Callable[[BaseMessage], BaseMessage | None]


@dataclass(frozen=True, slots=True)
class Step:
    """One pass over one history."""

    kind: EventKind
    source: list[BaseMessage]
    result: list[BaseMessage]
    """``source`` itself when the pass changed nothing."""
    edits: Edits
    delta: int
    """Tokens of ``result`` minus tokens of ``source`` (unscaled)."""
    diff: int = NONE
    """First index at which ``result`` and ``source`` hold different objects."""
    state: Any = None
    """What the pass decided, as it needs it to grow this step."""
    grown: bool = False
    """``result`` is the previous step's result followed by new messages."""
    stale: int = 0
    """How many of ``result``'s first places may hold an original in place of
    its rewrite (``_release``): a step may not read them again."""


class HeadForgotten(Exception):
    """A step would read a place ``_release`` emptied: run the passes afresh."""


def whole(
    kind: EventKind,
    source: list[BaseMessage],
    out: list[BaseMessage],
    edits: Edits,
    delta: int,
    state: Any,
) -> Step:
    if not edits:
        return Step(kind, source, source, NO_EDITS, 0, NONE, state)
    return Step(kind, source, out, edits, delta, first_diff(out, source), state)


def grown(
    prev: Step,
    source: list[BaseMessage],
    tail: list[BaseMessage],
    edits: Edits,
    delta: int,
    state: Any,
) -> Step:
    """``prev`` grown by ``tail``, the pass's output for the new messages."""
    edits = prev.edits + edits
    if not edits:
        return Step(prev.kind, source, source, NO_EDITS, 0, NONE, state, True)
    diff = prev.diff
    if diff == NONE:  # the previous result was its source: compare the tail
        start = len(prev.source)
        diff = first_diff(tail, source[start:])
        diff = diff if diff == NONE else start + diff
    return Step(
        prev.kind,
        source,
        [*prev.result, *tail],
        edits,
        prev.delta + delta,
        diff,
        state,
        True,
        prev.stale,
    )


def _map(
    source: list[BaseMessage], start: int, out_start: int, each: Each, count: Counter
) -> tuple[list[BaseMessage], Edits, int]:
    out: list[BaseMessage] = []
    changed: list[str] = []
    removed: list[str] = []
    delta = 0
    for i in range(start, len(source)):
        message = source[i]
        new = each(message)
        if new is None:
            removed.append(label(message, i))
            delta -= count(message)
            continue
        if new is not message:
            changed.append(label(new, out_start + len(out)))
            delta += count(new) - count(message)
        out.append(new)
    return out, Edits(tuple(changed), tuple(removed)), delta


def map_step(
    kind: EventKind,
    source: list[BaseMessage],
    each: Each,
    count: Counter,
    prev: Step | None = None,
) -> Step:
    """A pass that treats each message alone (sanitize, truncate)."""
    if prev is None:
        return whole(kind, source, *_map(source, 0, 0, each, count), None)
    out, edits, delta = _map(source, len(prev.source), len(prev.result), each, count)
    return grown(prev, source, out, edits, delta, None)


def repair_step(
    source: list[BaseMessage], count: Counter, prev: Step | None = None
) -> Step | None:
    """``repair_tool_pairs``; None when the new messages reach into the old."""
    if prev is None:
        out, edits, delta, state = repair_part(source, count=count)
        return whole("repair", source, out, edits, delta, state)
    start = len(prev.source)
    if not prev.state.continues(source[start:]):
        return None
    out, edits, delta, state = repair_part(
        source, start, len(prev.result), prev.state, count
    )
    return grown(prev, source, out, edits, delta, state)


def reached(prev: Step, where: Sequence[int]) -> None:
    """Raise ``HeadForgotten`` if ``where`` holds a place ``_release`` emptied."""
    if prev.stale and where and min(where) < prev.stale:
        raise HeadForgotten


def patch_at(
    out: list[BaseMessage], where: Sequence[int], fn: Each, count: Counter
) -> tuple[Edits, int, int]:
    """Apply ``fn`` to ``out`` at ``where``: edits, token change, first change."""
    changed: list[str] = []
    delta, first = 0, NONE
    for i in where:
        old = out[i]
        new = fn(old)
        if new is not None and new is not old:
            out[i] = new
            changed.append(label(new, i))
            delta += count(new) - count(old)
            first = min(first, i)
    return Edits(tuple(changed)), delta, first


def patched(
    prev: Step,
    source: list[BaseMessage],
    where: Sequence[int],
    fn: Each,
    count: Counter,
    state: Any,
) -> Step:
    """``prev`` grown by the new messages, then ``fn`` applied at ``where``."""
    reached(prev, where)
    start = len(prev.source)
    out = [*prev.result, *source[start:]]
    edits, delta, first = patch_at(out, where, fn, count)
    if not edits:
        return grown(prev, source, source[start:], NO_EDITS, 0, state)
    return Step(
        prev.kind,
        source,
        out,
        prev.edits + edits,
        prev.delta + delta,
        min(prev.diff, first),
        state,
        stale=prev.stale,
    )


@dataclass(frozen=True, slots=True)
class Batch:
    """Compression's decisions: whether it runs, where results are, how many go."""

    active: bool
    results: list[int]
    upto: int


def compress_step(
    source: list[BaseMessage],
    *,
    active: bool,
    keep: int,
    batch: int,
    compress: Each,
    count: Counter,
    prev: Step | None = None,
    assistant: bool = False,
) -> Step | None:
    """``compress_old_tool_results`` (a no-op unless ``active``)."""

    def due(done: Sequence[int]) -> Sequence[int]:
        return with_callers(source, done) if assistant else done

    if prev is None:
        results = [i for i, m in enumerate(source) if isinstance(m, ToolMessage)]
        upto = compress_boundary(len(results), keep, batch) if active else 0
        out = list(source)
        edits, delta, _ = patch_at(out, due(results[:upto]), compress, count)
        return whole(
            "compress", source, out, edits, delta, Batch(active, results, upto)
        )
    state: Batch = prev.state
    if active != state.active:
        return None
    start = len(prev.source)
    new = [i for i in range(start, len(source)) if isinstance(source[i], ToolMessage)]
    results = [*state.results, *new] if new else state.results
    upto = compress_boundary(len(results), keep, batch) if active else 0
    grown = Batch(active, results, upto)
    done = due(results[state.upto : upto])
    return patched(prev, source, done, compress, count, grown)


def _tidy(
    source: list[BaseMessage], start: int, out_start: int, count: Counter, bound: bool
) -> tuple[list[BaseMessage], Edits, int]:
    part = tidy_part(source, start, out_start, count, bound=bound)
    assert part is not None  # nothing before it to join
    return part


def hygiene_step(
    source: list[BaseMessage],
    count: Counter,
    prev: Step | None = None,
    *,
    removed: bool = True,
    bound: bool = False,
) -> Step | None:
    """``enforce_provider_hygiene``; the state says a first turn exists.

    A history whose first kept turn is an assistant message gets the placeholder
    user message before it, whether the passes removed the user message or it
    never had one: Anthropic and Gemini refuse a conversation that opens with the
    assistant (``tests/providers``). Its tokens are budgeted by the trim; its
    text says messages were ``removed`` only when they were.
    """
    if prev is not None:
        if not prev.state:  # no turn yet: new messages may need a placeholder
            return None
        last = prev.result[-1] if prev.result else None
        start, out_start = len(prev.source), len(prev.result)
        part = tidy_part(source, start, out_start, count, last, bound=bound)
        if part is None:  # joins the previous output's last message
            return None
        return grown(prev, source, *part, True)
    lead = next(
        (
            i
            for i, m in enumerate(source)
            if not isinstance(m, SystemMessage) and tidy_message(m) is not None
        ),
        None,
    )
    if lead is None or isinstance(source[lead], HumanMessage):
        tidied = _tidy(source, 0, 0, count, bound)
        return whole("hygiene", source, *tidied, lead is not None)
    head, head_edits, head_delta = _map(source[:lead], 0, 0, tidy_message, count)
    placeholder = history_start(removed)
    rest, edits, delta = _tidy(source, lead, len(head) + 1, count, bound)
    edits = head_edits + Edits(added=(label(placeholder, len(head)),)) + edits
    out = [*head, placeholder, *rest]
    return whole(
        "hygiene", source, out, edits, head_delta + count(placeholder) + delta, True
    )
