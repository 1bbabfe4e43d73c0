"""Compression with per-tool rules, as a step that can grow with the history.

``_steps.compress_step`` keeps one boundary over all results. With a tool's own
``keep_recent`` or a ``supersede_key`` (``ToolPolicy``), what is due is no prefix
of the results: this step works it out over the whole history
(``_compress.due_results``, ``_supersede.superseded_reads``), as the pass does,
and grows the previous step when what it rewrote is still rewritten the same
way and what is new to rewrite comes after it; otherwise it runs in full.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, ToolMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, label
from .._result_keys import Naming
from .._tool_policy import Written
from ..passes._compress import due_results, with_callers
from ..passes._supersede import supersede_message, superseded_reads
from ..passes._trim import Counter as Count
from ._steps import Each, Step, grown, reached, whole


@dataclass(frozen=True, slots=True)
class Ruled:
    """What the step rewrote: ``touched`` (with callers), ``newer`` superseded."""

    active: bool
    results: list[int]
    touched: frozenset[int]
    newer: dict[int, str]


def ruled_compress_step(
    source: list[BaseMessage],
    *,
    active: bool,
    keep: int,
    batch: int,
    compress: Each,
    count: Count,
    assistant: bool,
    keep_whole: Collection[str],
    tool_keep: Mapping[str, int],
    supersede: Mapping[str, str | tuple[str, ...] | Written],
    name_source: Naming = False,
    prev: Step | None = None,
) -> Step | None:
    """``compress_old_tool_results`` with per-tool rules (a no-op unless ``active``)."""
    state: Ruled | None = None if prev is None else prev.state
    if prev is not None and (not isinstance(state, Ruled) or state.active != active):
        return None
    start = 0 if prev is None else len(prev.source)
    new = [i for i in range(start, len(source)) if isinstance(source[i], ToolMessage)]
    results = new if state is None else [*state.results, *new]
    newer = superseded_reads(source, supersede, keep_whole) if active else {}
    due = due_results(source, results, keep, batch, tool_keep, newer) if active else []
    touched = frozenset([*(with_callers(source, due) if assistant else due), *newer])
    ruled = Ruled(active, results, touched, newer)

    def rewrite(i: int) -> BaseMessage:
        later, m = newer.get(i), source[i]
        if later is not None:
            return supersede_message(m, later, name_source=name_source)
        return compress(m) or m

    if prev is None or state is None:
        out = list(source)
        edits, delta, _ = _patch(out, sorted(touched), rewrite, count)
        return whole("compress", source, out, edits, delta, ruled)
    if not state.touched <= touched or any(
        newer.get(i) != later for i, later in state.newer.items()
    ):
        return None  # what it rewrote moved: run in full
    where = sorted(touched - state.touched | newer.keys() - state.newer.keys())
    if where and state.touched and where[0] <= max(state.touched):
        return None  # its edits would not come in order: run in full
    reached(prev, where)
    out = [*prev.result, *source[start:]]
    edits, delta, first = _patch(out, where, rewrite, count)
    if not edits:
        return grown(prev, source, source[start:], NO_EDITS, 0, ruled)
    return Step(
        "compress",
        source,
        out,
        prev.edits + edits,
        prev.delta + delta,
        min(prev.diff, first),
        ruled,
        stale=prev.stale,
    )


def _patch(
    out: list[BaseMessage],
    where: Sequence[int],
    rewrite: Callable[[int], BaseMessage],
    count: Count,
) -> tuple[Edits, int, int]:
    """Put ``rewrite(i)`` at each ``i`` of ``where``: edits, token change, first."""
    changed: list[str] = []
    delta, first = 0, NONE
    for i in where:
        old, new = out[i], rewrite(i)
        if new is not old:
            out[i] = new
            changed.append(label(new, i))
            delta += count(new) - count(old)
            first = min(first, i)
    return Edits(tuple(changed)), delta, first
