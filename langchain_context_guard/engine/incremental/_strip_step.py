"""The strip-thinking pass as a step that can grow with the history (``_steps``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, is_user
from ..passes._thinking import has_reasoning, stripped_count, stripper
from ..passes._trim import Counter
from ..passes._trim_units import positions
from ._steps import Step, patch_at, patched, reached, whole


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Where reasoning is, where the unfinished turn starts, how much is stripped."""

    holders: list[int]
    last_user: int
    open_turn: bool
    stripped: int

    def turn_start(self, length: int) -> int:
        """Index of the unfinished tool-use turn (``length`` when there is none)."""
        return max(self.last_user, 0) if self.open_turn else length


def _scan_reasoning(
    source: list[BaseMessage], start: int, state: Reasoning
) -> Reasoning:
    holders = list(state.holders)
    last_user, open_turn = state.last_user, state.open_turn
    for i in range(start, len(source)):
        m = source[i]
        if has_reasoning(m):
            holders.append(i)
        if is_user(m):
            last_user = i
        if not isinstance(m, ToolMessage):
            open_turn = isinstance(m, AIMessage) and bool(m.tool_calls)
    return Reasoning(holders, last_user, open_turn, 0)


def _read_reasoning(source: list[BaseMessage], codes: str) -> Reasoning:
    """``_scan_reasoning`` of a whole history from its kinds (string scans)."""
    last = len(codes.rstrip("T")) - 1  # the last message that is not a result
    open_turn = last >= 0 and codes[last] in "AR"
    if open_turn:
        message = source[last]
        open_turn = isinstance(message, AIMessage) and bool(message.tool_calls)
    return Reasoning(positions(codes, "R"), codes.rfind("U"), open_turn, 0)


def strip_step(
    source: list[BaseMessage],
    keep: int,
    count: Counter,
    prev: Step | None = None,
    codes: str | None = None,
    keep_signed: bool = False,
) -> Step:
    """``strip_old_thinking``; ``codes``: ``_trim_units.reasoning_kind`` of each."""
    strip_reasoning = stripper(keep_signed)
    before = prev.state if prev is not None else Reasoning([], -1, False, 0)
    start = len(prev.source) if prev is not None else 0
    if prev is None and codes is not None:
        state = _read_reasoning(source, codes)
    else:
        state = _scan_reasoning(source, start, before)
    n = stripped_count(state.holders, state.turn_start(len(source)), keep)
    state = replace(state, stripped=n)
    if prev is None:
        out = list(source)
        edits, delta, _ = patch_at(out, state.holders[:n], strip_reasoning, count)
        return whole("strip_thinking", source, out, edits, delta, state)
    done = before.stripped
    if n >= done:
        return patched(
            prev, source, state.holders[done:n], strip_reasoning, count, state
        )
    if not n:  # reasoning back everywhere (a new unfinished turn)
        return Step("strip_thinking", source, source, NO_EDITS, 0, NONE, state, False)
    reached(prev, state.holders[n:done])
    out = [*prev.result, *source[len(prev.source) :]]
    delta = prev.delta
    for i in state.holders[n:done]:
        delta -= count(out[i]) - count(source[i])
        out[i] = source[i]
    edits = Edits(prev.edits.changed[:n])
    diff = state.holders[0]
    return Step(
        "strip_thinking", source, out, edits, delta, diff, state, False, prev.stale
    )
