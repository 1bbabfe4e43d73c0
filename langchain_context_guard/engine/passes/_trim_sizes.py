"""How big a history grows, prefix by prefix, for the trim plan (``_trim``).

The cut must never move back as the history grows, so it is planned on the
largest size any prefix of the history had (``_trim``'s module docstring). A
prefix is not always smaller than the history after it:

- a compression batch shrinks old results (the plan keeps the size just before
  each batch);
- a prefix that ends in an assistant message whose tool calls are not all
  answered yet is sent with a synthetic error result for each open call
  (``_repair.synthetic_result``, about 35 tokens). A real result that is smaller
  (``ok``, an empty list) makes the next prefix smaller than this one, so the cut
  that prefix needed would move back. Each call's results are counted as what
  was sent on the way: while they come in, the results not in yet cost their
  synthetic result's tokens (the peak of the group, ``highest``).

A call's results come in one by one in the order the history keeps (``_repair``
keeps them in that order and puts synthetic ones after), and the number of
results counted for compression is the same on every such prefix (a synthetic
result counts as one), so those prefixes differ only in which results are real.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import is_not
from sys import maxsize

from ._compress import compress_boundary

Costs = tuple[int, int, bool, int]
"""A message's tokens as written, as it ends up (compressed, for a tool result),
whether it is a tool result, and for one the tokens of the synthetic result it
is sent as while not in yet (0: none)."""
Settled = list[tuple[int, int, int]]
"""Sizes a cut must stay fit for: (size, results compressed, units it could drop);
in a ``Trail``, the last field is a message index (the unit count is read from
it when a cut needs it, as the units move while the sizes do not)."""
Ends = Sequence[int]
"""The last message index of each droppable unit, in order."""
Mark = tuple[int, int, int, int]
"""Where a walk can go on from (``Trail``): a message index with no call's results
pending before it, the raw tokens before it, the results before it, and how many
sizes were settled by then."""

_END: Costs = (0, 0, False, 0)
SPACING = 256
"""Messages between two marks of a ``Trail`` (at least)."""


def walk(
    costs: Iterable[Costs],
    keep: int,
    batch: int,
    raw: int,
    saved: list[int],
    peak: int,
    settled: Settled | None = None,
    ends: Ends = (),
) -> tuple[int, int]:
    """Grow a history's sizes by ``costs``; returns its raw tokens and peak.

    ``saved`` (what compressing the first n results saves) grows in place.
    ``settled``, if given, gets the size just before each compression batch and
    each call's peak larger than its results' (``ends``: each droppable unit's
    last index, to tell how many units each could drop); else ``peak`` becomes
    the largest call's peak at the current compression (0 after a batch).
    """
    if settled is None:
        return _walk(tuple(costs), 0, keep, batch, raw, saved, peak, None, None)
    found: Settled = []
    raw, _ = _walk(tuple(costs), 0, keep, batch, raw, saved, peak, found, None)
    settled.extend((size, done, bisect_left(ends, at)) for size, done, at in found)
    return raw, 0


@dataclass(frozen=True, slots=True)
class Trail:
    """A whole history's walk (``trail``), kept to grow the next pruning's from.

    ``settled`` holds message indices, not unit counts (``Settled``); ``marks``
    the points the next walk may start from, oldest first.
    """

    keep: int
    batch: int
    lead: int
    costs: Sequence[Costs]
    raw: int
    saved: tuple[int, ...]
    settled: Settled
    marks: list[Mark]
    changed: int
    """The first index whose costs were not the held trail's (0: none held)."""


def trail(
    costs: Sequence[Costs], keep: int, batch: int, lead: int, held: Trail | None
) -> Trail:
    """The walk of a whole history from ``lead`` tokens, settling every size.

    With ``held``, the previous pruning's trail: only the messages from the last
    mark before the first one whose costs are not the very same objects are
    walked (found at C speed), so a pruning walks what changed, not the history.
    Equal to the walk of every message (``tests/engine/test_peak.py``).
    """
    start, raw, saved, settled, marks = 0, lead, [0], [], []
    changed = 0
    if held is not None and (held.keep, held.batch, held.lead) == (keep, batch, lead):
        old = held.costs
        m = min(len(old), len(costs))
        changed = next(compress(count(), map(is_not, costs[:m], old[:m])), m)
        j = bisect_left(held.marks, (changed,))  # marks before the change
        if j:
            start, raw, n, k = held.marks[j - 1]
            saved, settled = list(held.saved[: n + 1]), held.settled[:k]
            marks = held.marks[:j]
    raw, _ = _walk(costs[start:], start, keep, batch, raw, saved, 0, settled, marks)
    return Trail(keep, batch, lead, costs, raw, tuple(saved), settled, marks, changed)


def _walk(
    costs: Sequence[Costs],
    start: int,
    keep: int,
    batch: int,
    raw: int,
    saved: list[int],
    peak: int,
    settled: Settled | None,
    marks: list[Mark] | None,
) -> tuple[int, int]:
    """``walk`` from message ``start``; settled sizes name a message index.

    ``marks``, if given, gets a ``Mark`` every ``SPACING`` messages or more.
    """
    done = compress_boundary(len(saved) - 1, keep, batch) if batch else 0
    n = len(saved) - 1  # results so far
    group: list[tuple[int, int, int]] = []
    rises = False  # a result of the group is smaller than its synthetic one
    due = maxsize
    if marks is not None and settled is not None:
        due = marks[-1][0] + SPACING if marks else start
    end = start + len(costs)
    for i, (cost, compressed, is_result, twin) in enumerate((*costs, _END), start):
        if not is_result:
            if group:  # the call's results are all in
                if rises:
                    top = highest(group, raw - saved[done], n + 1 - len(group), done)
                    if top and settled is not None:
                        settled.append((top, done, i - len(group) - 1))
                    peak = max(peak, top)
                group, rises = [], False
            if i >= due and i < end:
                assert marks is not None and settled is not None
                marks.append((i, raw, n, len(settled)))
                due = i + SPACING
            raw += cost
            continue
        n += 1  # the boundary moves when the n-th result comes in (``_compress``)
        if batch and n > keep and (n - keep) % batch == 0:
            if settled is not None:
                settled.append((raw - saved[done], done, i))
            peak = 0
            done = n - keep
        raw += cost
        saved.append(saved[-1] + cost - compressed)
        group.append((cost, compressed, twin))
        rises = rises or twin > min(cost, compressed)
    return raw, 0 if settled is not None else peak


def highest(
    group: Sequence[tuple[int, int, int]], size: int, first: int, done: int
) -> int:
    """The largest size of the prefixes through a call's results (0: ``size``).

    ``group`` holds each result's tokens as written, compressed, and synthetic;
    ``size`` is the history's with all of them in, ``first`` the number of the
    first among all results (from 1), ``done`` how many results are compressed.
    Going back one result at a time, the latest real one gives way to its
    synthetic result.
    """
    top = now = size
    for k in range(len(group) - 1, -1, -1):
        cost, compressed, twin = group[k]
        now += twin - (compressed if first + k <= done else cost)
        top = max(top, now)
    return top if top > size else 0
