"""The trim pass as a step that can grow with the history (see ``_steps``).

The cut is planned once (``_trim.plan_cut``) and kept while the history grows:
a grown call only checks that the same cut still fits, so the kept prompt's
messages do not move between calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from langchain_core.messages import (
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from .._events import NO_EDITS, Edits
from .._messages import label
from .._policy import GuardPolicy
from .._tool_policy import result_caps
from ..passes._compress import callers
from ..passes._hygiene import tidy_message
from ..passes._repair import call_name, stand_in_named
from ..passes._supersede import supersede_message
from ..passes._thinking import cut_cost_view
from ..passes._trim import Counter, Measure, Squeeze, fit_cut
from ..passes._trim_plan import Cut, Plan, Sizes, plan_cut
from ..passes._trim_sizes import Costs
from ..passes._trim_units import dropped_positions, kept_positions, remap_at
from ._steps import NONE, Step, first_diff, grown


@dataclass(frozen=True, slots=True)
class TrimState:
    """The plan, the history's sizes, and the cut made (``more``: and beyond it)."""

    plan: Plan
    sizes: Sizes
    dropped: int
    more: bool


def trim_step(
    source: list[BaseMessage],
    costs: Sequence[Costs],
    *,
    room: float,
    quantum: float,
    keep: int,
    batch: int,
    keep_first_user: bool,
    turn_limit: int | None,
    budget: int,
    window: int,
    measure: Measure,
    cost: Counter,
    squeeze: Squeeze,
    count: Counter,
    source_tokens: int,
    cut_room: float | None = None,
    cut_budget: int | None = None,
    codes: str | None = None,
    lead: int = 0,
    memo: dict[str, Any] | None = None,
    policy: GuardPolicy | None = None,
) -> Step:
    """``trim_to_budget`` with the guard's plan (see ``_trim``), in full.

    A history that fits ``room`` is kept whole; one that must be cut is cut to
    ``cut_room`` / ``cut_budget`` when given (room left for the digest).
    ``lead``: tokens hygiene puts first (``plan_cut``). ``memo`` keeps the plan:
    it depends on the costs and kinds, not on the room, so a second try at
    another target (``_prune._nearer``) reuses it. ``policy``: whose excluded
    tools' results are never cut to fit (``fit_cut``).
    """
    args = (quantum, keep, batch, keep_first_user, turn_limit, codes, lead)
    held = memo.get("plan") if memo is not None and codes is not None else None
    if held is not None and held[0] == args and held[1] == costs:
        plan, sizes = held[2]
    else:
        plan, sizes = plan_cut(
            source,
            costs,
            quantum=quantum,
            keep=keep,
            batch=batch,
            keep_first_user=keep_first_user,
            turn_limit=turn_limit,
            codes=codes,
            lead=lead,
            held=None if held is None else held[2][0],
        )
        if memo is not None and codes is not None:
            memo["plan"] = (args, costs, (plan, sizes))
    cut = plan.cut(sizes, room)
    if (cut is None or cut.dropped) and cut_room is not None:
        cut = plan.cut(sizes, cut_room)
        budget = budget if cut_budget is None else cut_budget
    more = cut is None
    if cut is None:
        cut = Cut(plan.units, len(plan.units), (), plan.protected)
    fit = partial(
        fit_cut,
        source,
        measure=measure,
        cost=cost,
        window=window,
        squeeze=squeeze,
        tool_caps=None if policy is None else result_caps(policy),
    )
    kept, dropped, beyond = fit(cut, budget=budget)
    if dropped and cut_room is not None and cut_budget not in (None, budget):
        # The plan kept all, but what hygiene adds did not fit: a cut after all,
        # so it leaves the digest its room too.
        assert cut_budget is not None
        planned = plan.cut(sizes, cut_room)
        more, budget = more or planned is None, cut_budget
        cut = planned or Cut(plan.units, len(plan.units), (), plan.protected)
        kept, dropped, beyond = fit(cut, budget=budget)
    state = TrimState(plan, sizes, dropped, more or beyond)
    if kept is source:
        return Step("trim", source, source, NO_EDITS, 0, NONE, state)
    gone = dropped_positions(plan.units, dropped)
    stay = kept_positions(plan.units, dropped, len(source), plan.protected)
    changed = [
        label(new, j)
        for j, (i, new) in enumerate(zip(stay, kept, strict=False))
        if new is not source[i]
    ]
    held = None if memo is None else memo.get("labels")
    names = remap_at(source, held, _label)
    if memo is not None:
        memo["labels"] = (source, names)
    edits = Edits(tuple(changed), tuple(map(names.__getitem__, gone)))
    delta = sum(map(count, kept)) - source_tokens
    return Step("trim", source, kept, edits, delta, first_diff(kept, source), state)


def message_costs(
    messages: list[BaseMessage],
    i: int,
    count: Counter,
    compress: Callable[[BaseMessage], BaseMessage],
    assistant: bool,
    twins: dict[str, int],
    newer: Mapping[int, str] | None = None,
) -> Costs:
    """``_trim_sizes.Costs`` of ``messages[i]``: raw, for good, is a result, twin.

    As sent (an empty result as its placeholder). A result's cost for good
    also takes off what compressing its ``callers`` saves (with ``assistant``,
    ``compress_assistant_text``): the two go together. Its twin is the
    synthetic result it is sent as while not in yet (by tool name, counted once
    into ``twins``). A superseded result (in ``newer``, ``_supersede``) costs
    its pointer alone, and counts in no compression batch: no result to the
    plan.
    """
    m = messages[i]
    if not isinstance(m, ToolMessage):
        return _plain(count(cut_cost_view(m)))
    m = tidy_message(m) or m
    later = newer.get(i) if newer else None
    if later is not None:
        return _plain(count(supersede_message(m, later)))
    good = count(compress(m))
    if assistant:
        for j in callers(messages, i):
            good -= count(messages[j]) - count(compress(messages[j]))
    name = call_name(messages, i)
    twin = twins.get(name)
    if twin is None:
        twin = twins[name] = count(stand_in_named(name))
    return count(m), good, True, twin


_PLAIN: dict[int, Costs] = {}
_PLAIN_MAX = 8_192


def _plain(tokens: int) -> Costs:
    """The costs of a message that is no tool result: one object per count.

    A pruning keeps the costs of every message; most are these, and a long
    history holds many messages of the same size.
    """
    costs = _PLAIN.get(tokens)
    if costs is None:
        if len(_PLAIN) >= _PLAIN_MAX:
            _PLAIN.clear()
        costs = _PLAIN[tokens] = (tokens, tokens, False, 0)
    return costs


def _label(messages: Sequence[BaseMessage], i: int) -> str:
    """``_messages.label`` of ``messages[i]`` (for ``_trim_units.remap_at``)."""
    return label(messages[i], i)


def grow_trim(
    prev: Step,
    source: list[BaseMessage],
    sizes: Sizes,
    *,
    room: float,
    cut_room: float | None = None,
) -> Step | None:
    """The previous cut on the grown history, if it is still the cut (no fit check)."""
    state: TrimState = prev.state
    if state.more or sizes.compressed != state.sizes.compressed:
        return None  # a batch is due: the plan gains a constraint
    tail = source[len(prev.source) :]
    if any(isinstance(m, HumanMessage | SystemMessage) for m in tail):
        return None  # turns or protected messages change: plan again
    cut = state.plan.cut(sizes, room)
    if cut is not None and cut.dropped and cut_room is not None:
        cut = state.plan.cut(sizes, cut_room)
    if cut is None or cut.dropped != state.dropped:
        return None
    return grown(prev, source, tail, NO_EDITS, 0, replace(state, sizes=sizes))
