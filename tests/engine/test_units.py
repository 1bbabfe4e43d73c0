"""``_trim_units``: the trim plan's fast inputs equal the plain per-message versions."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from unittest.mock import patch

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard.engine._messages import MARKER_KEY, is_user
from langchain_context_guard.engine.incremental._strip_step import (
    Reasoning,
    _read_reasoning,
    _scan_reasoning,
)
from langchain_context_guard.engine.passes import _trim_sizes as _peak
from langchain_context_guard.engine.passes import _trim_units as _units
from langchain_context_guard.engine.passes._compress import callers, compress_boundary
from langchain_context_guard.engine.passes._trim_plan import Cut, plan_cut
from langchain_context_guard.engine.passes._trim_units import (
    remap,
    remap_at,
)


def _mark(kind: str) -> dict[str, object]:
    return {MARKER_KEY: {"kind": kind}}


def _message(code: str, i: int) -> BaseMessage:
    call = {"name": "bash", "args": {"i": i}, "id": f"c{i}", "type": "tool_call"}
    thinking = [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "x"}]
    return {
        "s": lambda: SystemMessage("sys"),
        "u": lambda: HumanMessage(f"user {i}"),
        "m": lambda: HumanMessage("summary", additional_kwargs=_mark("summary")),
        "d": lambda: HumanMessage("digest", additional_kwargs=_mark("digest")),
        "a": lambda: AIMessage(f"answer {i}"),
        "c": lambda: AIMessage("", tool_calls=[call]),
        "r": lambda: AIMessage(thinking, tool_calls=[call]),
        "k": lambda: AIMessage("", additional_kwargs={"reasoning_content": "hm"}),
        "t": lambda: ToolMessage(f"out {i}", tool_call_id=f"c{i}"),
        "z": lambda: ToolMessage(
            "cut", tool_call_id="x", additional_kwargs=_mark("compressed")
        ),
        "o": lambda: ChatMessage("other", role="critic"),
    }[code]()


HISTORIES = st.text(alphabet="suumdaccrktttzo", max_size=60).map(
    lambda codes: [_message(c, i) for i, c in enumerate(codes)]
)
SETTINGS = settings(max_examples=100, deadline=None)


def _marked(message: BaseMessage, kind: str) -> bool:
    mark = message.additional_kwargs.get(MARKER_KEY)
    return isinstance(mark, dict) and mark.get("kind") == kind


def _protected(messages: Sequence[BaseMessage], keep_first_user: bool) -> set[int]:
    """Kept by trimming: system, summary and placeholder messages, the users kept."""
    keep = {  # and the placeholder first turn (dropped, it would come back)
        i
        for i, m in enumerate(messages)
        if isinstance(m, SystemMessage)
        or _marked(m, "summary")
        or _marked(m, "placeholder")
    }
    users = [i for i, m in enumerate(messages) if is_user(m)]
    if users:
        keep.add(users[-1])
        if keep_first_user:
            keep.add(users[0])
    return keep


def _groups(indices: list[int], messages: Sequence[BaseMessage]) -> list[list[int]]:
    """Split indices into assistant + tool-result groups (never splitting a call)."""
    groups: list[list[int]] = []
    for i in indices:
        if isinstance(messages[i], ToolMessage) and groups:
            prev = messages[groups[-1][0]]
            if isinstance(prev, AIMessage | ToolMessage):
                groups[-1].append(i)
                continue
        groups.append([i])
    return groups


def droppable_units(
    messages: Sequence[BaseMessage], keep_first_user: bool = True
) -> list[list[int]]:
    """The units ``_trim_units.units_from`` finds, per message (its readable spec).

    Message indices in the order they may be dropped, as indivisible units.

    Older turns go whole (a user message and everything answering it); the turn
    holding the kept first user message and the latest turn give up their
    assistant + tool-result groups one at a time, and the latest group after the
    latest user message is kept.
    """
    keep = _protected(messages, keep_first_user)
    users = [i for i, m in enumerate(messages) if is_user(m)]
    bounds = [0, *users[1:], len(messages)] if users else [0, len(messages)]
    units: list[list[int]] = []
    for t in range(len(bounds) - 1):
        turn = [i for i in range(bounds[t], bounds[t + 1]) if i not in keep]
        if not turn:
            continue
        last_turn = t == len(bounds) - 2
        split = last_turn or any(
            i in keep for i in range(bounds[t], bounds[t + 1]) if is_user(messages[i])
        )
        if split:
            groups = _groups(turn, messages)
            # The latest step is kept; a message before the latest user message
            # is not one (it may be an assistant message opening the history).
            latest = last_turn and (not users or groups[-1][-1] > users[-1])
            units.extend(groups[:-1] if latest else groups)
        else:
            units.append(turn)
    return units


@SETTINGS
@given(HISTORIES, st.booleans())
def test_units_equal_droppable_units(history, keep_first_user):
    units = _units.units_from(_units.kinds(history), keep_first_user)
    assert [list(u) for u in units] == droppable_units(history, keep_first_user)


def _reference_plan(messages, costs, quantum, keep, batch, keep_first_user, turn_limit):
    """``plan_cut`` as it was written per message (before ``_trim_units``)."""
    units = droppable_units(messages, keep_first_user)
    results = list(accumulate((c[2] for c in costs), initial=0))
    grid = [(0, 0, 0)]
    written, mark = 0, quantum
    for k, unit in enumerate(units, start=1):
        written += sum(costs[i][0] for i in unit)
        if quantum < 1 or written >= mark:
            grid.append((k, written, results[unit[-1] + 1]))
            if quantum >= 1:
                mark = (math.floor(written / quantum) + 1) * quantum
    limit = 0
    if turn_limit is not None:
        users = [i for i, m in enumerate(messages) if is_user(m)]
        if len(users) > turn_limit:
            start = users[-turn_limit]
            limit = sum(1 for unit in units if unit[-1] < start)
    ends = [unit[-1] for unit in units]
    settled = []
    raw, saved, done = 0, [0], 0
    for i, (cost, compressed, is_result, _) in enumerate(costs):
        if is_result and batch and compress_boundary(len(saved), keep, batch) > done:
            settled.append((raw - saved[done], done, bisect_left(ends, i)))
        raw += cost
        if is_result:
            saved.append(saved[-1] + cost - compressed)
            done = compress_boundary(len(saved) - 1, keep, batch) if batch else 0
    return units, grid, settled, limit, raw, tuple(saved)


@SETTINGS
@given(
    HISTORIES,
    st.data(),
    st.sampled_from([0.0, 0.5, 7.0, 40.0]),
    st.sampled_from([0, 1, 6]),
    st.sampled_from([0, 1, 3, 8]),
    st.booleans(),
    st.sampled_from([None, 1, 2]),
)
def test_plan_cut_equals_the_per_message_plan(
    history, data, quantum, keep, batch, keep_first_user, turn_limit
):
    costs = [
        (c, data.draw(st.integers(0, c)), isinstance(m, ToolMessage), 0)
        for m in history
        for c in [data.draw(st.integers(1, 30))]
    ]
    plan, sizes = plan_cut(
        history,
        costs,
        quantum=quantum,
        keep=keep,
        batch=batch,
        keep_first_user=keep_first_user,
        turn_limit=turn_limit,
    )
    units, grid, settled, limit, raw, saved = _reference_plan(
        history, costs, quantum, keep, batch, keep_first_user, turn_limit
    )
    assert [list(u) for u in plan.units] == units
    assert (plan.grid, plan.settled, plan.limit) == (grid, settled, limit)
    assert (sizes.raw, sizes.saved) == (raw, saved)
    for dropped in range(len(units) + 1):
        gone = {i for unit in units[:dropped] for i in unit}
        kept = [m for i, m in enumerate(history) if i not in gone]
        assert Cut(plan.units, dropped).keep(history, dropped) == kept
        assert _units.dropped_positions(plan.units, dropped) == sorted(gone)


@SETTINGS
@given(HISTORIES)
def test_reasoning_read_from_kinds_equals_the_scan(history):
    codes = "".join(map(_units.reasoning_kind, history))
    start = Reasoning([], -1, False, 0)
    assert _read_reasoning(history, codes) == _scan_reasoning(history, 0, start)


@SETTINGS
@given(HISTORIES, HISTORIES, st.data())
def test_carried_results_equal_fresh_ones(before, extra, data):
    after = list(before)
    for i in data.draw(st.sets(st.integers(0, max(len(after) - 1, 0)))):
        if i < len(after):
            after[i] = _message("t", 1000 + i)
    cut = data.draw(st.integers(0, len(after)))
    after = after[:cut] + extra
    held = (before, list(map(_units.kind, before)))
    assert remap(after, held, _units.kind) == list(map(_units.kind, after))
    assert remap(after, None, _units.kind) == list(map(_units.kind, after))


def _with_callers(messages: list[BaseMessage], i: int) -> tuple[int, ...]:
    """A result's value depends on its callers (as ``Run._costs`` does)."""
    mine = (id(messages[i]),)
    if not isinstance(messages[i], ToolMessage):
        return mine
    return mine + tuple(id(messages[j]) for j in callers(messages, i))


@SETTINGS
@given(HISTORIES, HISTORIES, st.data())
def test_carried_at_equals_fresh_results_that_read_back(before, extra, data):
    after = list(before)
    for i in data.draw(st.sets(st.integers(0, max(len(after) - 1, 0)))):
        if i < len(after):  # any kind: a moved result changes its next callers
            after[i] = _message(data.draw(st.sampled_from("uacrt")), 1000 + i)
    cut = data.draw(st.integers(0, len(after)))
    after = after[:cut] + extra
    fresh = [_with_callers(after, i) for i in range(len(after))]
    held = (before, [_with_callers(before, i) for i in range(len(before))])
    assert remap_at(after, held, _with_callers) == fresh
    assert remap_at(after, None, _with_callers) == fresh


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet="SUATO", max_size=60),
    st.lists(st.text(alphabet="SUATTO", max_size=30), min_size=1, max_size=4),
    st.booleans(),
    st.data(),
)
def test_units_grown_from_held_ones_equal_fresh_ones(
    first, more, keep_first_user, data
):
    """``units_from(..., held)``: a history extended (new users, systems, stray
    results after a kept user...) or replaced, call after call, gives the units
    read afresh."""
    codes = first
    held = (codes, _units.units_from(codes, keep_first_user))
    for extra in more:
        codes = codes + extra if data.draw(st.booleans()) else extra
        got = _units.units_from(codes, keep_first_user, held)
        assert got == _units.units_from(codes, keep_first_user)
        held = (codes, got)


@SETTINGS
@given(HISTORIES, st.booleans())
def test_kept_positions_from_the_protected_equal_the_set_difference(
    history, keep_first_user
):
    codes = _units.kinds(history)
    units = _units.units_from(codes, keep_first_user)
    kept = _units.protected(codes, keep_first_user)
    for dropped in range(len(units) + 1):
        fast = _units.kept_positions(units, dropped, len(history), kept)
        assert fast == _units.kept_positions(units, dropped, len(history))


@st.composite
def _message_costs(draw, messages):
    out = []
    for m in messages:
        cost = draw(st.integers(1, 30))
        result = isinstance(m, ToolMessage)
        twin = draw(st.sampled_from([0, 5, 35])) if result else 0
        out.append((cost, draw(st.integers(-5, cost)), result, twin))
    return out


@settings(max_examples=100, deadline=None)
@given(
    HISTORIES,
    st.lists(HISTORIES, min_size=1, max_size=3),
    st.data(),
    st.sampled_from([0, 1, 6]),
    st.sampled_from([0, 1, 3]),
    st.sampled_from([None, 1, 2]),
)
def test_a_plan_grown_from_the_last_equals_a_fresh_one(
    first, more, data, keep, batch, turn_limit
):
    """``plan_cut(..., held=last plan)`` over histories cut back anywhere and
    grown (the kept messages and costs the very same objects, a cost changed
    now and then), at the same or another grid step: the plan made afresh."""
    history = first
    costs = data.draw(_message_costs(history))
    step = st.sampled_from([0.0, 0.5, 7.0, 40.0])
    now = {"keep": keep, "batch": batch, "turn_limit": turn_limit}
    now |= {"quantum": data.draw(step), "keep_first_user": True, "lead": 0}
    plan, _ = plan_cut(history, costs, **now)
    with patch.object(_peak, "SPACING", data.draw(st.integers(1, 4))):
        for extra in more:
            cut = data.draw(st.integers(0, len(history)))
            history = history[:cut] + extra
            costs = costs[:cut] + data.draw(_message_costs(extra))
            if costs and data.draw(st.booleans()):
                i = data.draw(st.integers(0, len(costs) - 1))
                costs[i] = (costs[i][0] + 1, *costs[i][1:])
            if data.draw(st.integers(0, 3)) == 0:  # now and then, another setting
                now |= {
                    "quantum": data.draw(step),
                    "keep_first_user": data.draw(st.booleans()),
                    "lead": data.draw(st.sampled_from([0, 7])),
                }
            got, sizes = plan_cut(history, costs, held=plan, **now)
            ref, fresh = plan_cut(history, costs, **now)
            assert got.units == ref.units
            assert (got.grid, got.settled, got.limit) == (
                ref.grid,
                ref.settled,
                ref.limit,
            )
            assert list(got.protected) == list(ref.protected)
            assert (sizes.raw, sizes.saved, sizes.peak) == (
                fresh.raw,
                fresh.saved,
                fresh.peak,
            )
            plan = got


@pytest.mark.parametrize(
    ("codes", "held"),
    [
        ("UATAU", "UATSU"),
        ("UATAUU", "UATSUU"),
        ("UATU", "UATU"),
        ("UATAUA", "UATAUA"),
        ("UAUATAT", "UAUATAT"),
        ("SU", "SU"),
        ("AU", "SU"),
        ("UATA", "UATA"),
    ],
    ids=[
        "reply",
        "hook-then-reply",
        "after-a-result",
        "step-after",
        "later-steps",
        "task-only",
        "first-message",
        "no-reply-yet",
    ],
)
def test_the_message_the_latest_user_answers_is_held(codes: str, held: str) -> None:
    assert _units.hold_answered(codes) == held


@given(
    st.text(alphabet="SUATO", max_size=40),
    st.lists(st.text(alphabet="SUATTO", max_size=20), min_size=1, max_size=4),
    st.booleans(),
)
def test_units_grown_from_held_codes_equal_fresh_ones(first, more, keep_first_user):
    """A question held while its reply is the latest user message is let go once
    a later one comes: units grown from the earlier held codes equal fresh ones."""
    codes = first
    held = (
        _units.hold_answered(codes),
        _units.units_from(_units.hold_answered(codes), keep_first_user),
    )
    for extra in more:
        codes += extra
        now = _units.hold_answered(codes)
        got = _units.units_from(now, keep_first_user, held)
        assert got == _units.units_from(now, keep_first_user)
        held = (now, got)
