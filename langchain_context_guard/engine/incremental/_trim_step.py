"""The trim pass as a step that can grow with the history (see ``_steps``).

The same plan and fit as the reference's (``passes._trim_plan.plan_cut``,
``passes._trim.cut_to_fit``), the plan kept while the history grows: a grown
call only checks that the same cut still fits, so the kept prompt's messages do
not move between calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, first_diff, is_pinned, label
from .._policy import GuardPolicy
from .._result_keys import Naming
from .._tool_policy import result_caps
from ..passes._trim import Counter, Measure, Squeeze, Trimmed, cut_to_fit
from ..passes._trim_plan import Sizes, plan_cut
from ..passes._trim_sizes import Costs
from ..passes._trim_units import kept_positions, remap_at
from ._steps import Step, grown


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
    named: Naming = False,
) -> Step:
    """The trim, in full: ``plan_cut``, then ``cut_to_fit`` (its docstring).

    ``lead``: tokens hygiene puts first (``plan_cut``). ``memo`` keeps the plan:
    it depends on the costs and kinds, not on the room, so a second try at
    another target (``_prune._nearer``) reuses it. ``policy``: whose excluded
    tools' results are never cut to fit (``fit_cut``). ``named``: what the
    marker of a result cut to fit names (``_result_keys.Naming``).
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
    kept, state = cut_to_fit(
        source,
        plan,
        sizes,
        room=room,
        budget=budget,
        measure=measure,
        cost=cost,
        window=window,
        squeeze=squeeze,
        tool_caps=None if policy is None else result_caps(policy),
        cut_room=cut_room,
        cut_budget=cut_budget,
        named=named,
    )
    if kept is source:
        return Step("trim", source, source, NO_EDITS, 0, NONE, state)
    gone = state.gone
    stay = kept_positions(plan.units, state.dropped, len(source), plan.protected)
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
    state: Trimmed = prev.state
    if state.more or sizes.compressed != state.sizes.compressed:
        return None  # a batch is due: the plan gains a constraint
    tail = source[len(prev.source) :]
    if any(isinstance(m, HumanMessage | SystemMessage) or is_pinned(m) for m in tail):
        return None  # turns or protected messages change: plan again
    cut = state.plan.cut(sizes, room)
    if cut is not None and cut.dropped and cut_room is not None:
        cut = state.plan.cut(sizes, cut_room)
    if cut is None or cut.dropped != state.dropped:
        return None
    return grown(prev, source, tail, NO_EDITS, 0, replace(state, sizes=sizes))
