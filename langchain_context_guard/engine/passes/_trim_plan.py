"""The trim's plan: where a history may be cut, found once per pruning.

``plan_cut`` reads a history's droppable units (``_trim_units``) and its sizes
(``_trim_sizes``) into a ``Plan``: the grid of cut points and the peaks a cut must
stay fit for. ``Plan.cut`` gives the first grid point that leaves a history of
given ``Sizes`` within the room; ``_trim.fit_cut`` then fits what is kept. The
module docstring of ``_trim`` says why the cut is planned on the peak.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress, count
from operator import is_not, itemgetter

from langchain_core.messages import BaseMessage

from ._compress import compress_boundary
from ._trim_sizes import Costs, Settled, Trail, trail, walk
from ._trim_units import (
    grid_from,
    hold_pins,
    kept_positions,
    kinds,
    positions,
    protected,
    units_from,
)

Units = Sequence[Sequence[int]]
"""Droppable units, oldest first: each the indices of its messages, in order."""


@dataclass(frozen=True, slots=True)
class Sizes:
    """A history's size as compression leaves it, kept up as the history grows.

    Compression (``_compress``) shrinks results in batches of ``batch`` (0: it does
    not run), keeping the newest ``keep`` whole.
    """

    keep: int = 0
    batch: int = 0
    raw: int = 0
    saved: tuple[int, ...] = (0,)
    """What compressing the first n results saves, for each n."""
    peak: int = 0
    """Grown since the plan: the largest size of a call's prefixes (``_trim_sizes``)."""

    @property
    def compressed(self) -> int:
        """How many of the oldest results compression has shrunk by now."""
        if not self.batch:
            return 0
        return compress_boundary(len(self.saved) - 1, self.keep, self.batch)

    @property
    def size(self) -> int:
        """Tokens of the history once compressed."""
        return self.raw - self.saved[self.compressed]

    def grow(self, costs: Iterable[Costs]) -> Sizes:
        """The sizes after more messages (``_trim_sizes.walk``)."""
        saved, keep, batch = list(self.saved), self.keep, self.batch
        raw, peak = walk(costs, keep, batch, self.raw, saved, self.peak)
        return Sizes(keep, batch, raw, tuple(saved), peak)


@dataclass(frozen=True)
class Cut:
    """Where trimming cuts a history: its first ``dropped`` units go.

    ``grid`` lists the grid points from the cut's lower bound on, as numbers of
    leading units dropped (where ``fit_cut`` may move on to); ``protected`` the
    indices no unit holds (``_trim_units.protected``), if known.
    """

    units: Units
    dropped: int
    grid: tuple[int, ...] = ()
    protected: Sequence[int] | None = None

    def keep(self, messages: list[BaseMessage], dropped: int) -> list[BaseMessage]:
        """``messages`` without their first ``dropped`` units."""
        if not dropped:
            return messages
        kept = kept_positions(self.units, dropped, len(messages), self.protected)
        return list(map(messages.__getitem__, kept))


_last = itemgetter(-1)


@dataclass(frozen=True)
class Plan:
    """All a history's cut depends on besides its size and the room for it.

    ``grid`` holds the grid points as (units dropped, their tokens as written,
    the results among them); ``peaks`` the sizes the cut must stay fit for
    (``_trim_sizes``): the history just before each compression batch, and prefixes
    sent with synthetic results for open calls, as (size, results compressed,
    the index of the message the prefix ends with); ``settled`` names the units
    it could drop instead. The rest is what the next plan grows from
    (``plan_cut``'s ``held``).
    """

    units: Sequence[tuple[int, ...]]
    grid: list[tuple[int, int, int]]
    peaks: Settled
    limit: int
    protected: Sequence[int]
    codes: str
    quantum: float
    keep_first_user: bool
    trail: Trail
    held_results: tuple[int, ...] = ()
    """Ordinals of the results no unit holds (``drop_last`` tools' results and
    pinned pairs', kept in place): a grid point's dropped results are the first
    ones less these."""

    @property
    def settled(self) -> Settled:
        """``peaks`` as (size, results compressed, units it could drop)."""
        return [(size, done, self._cap(at)) for size, done, at in self.peaks]

    def _cap(self, at: int) -> int:
        """How many units end before message ``at``."""
        return bisect_left(self.units, at, key=_last)

    def cut(self, sizes: Sizes, room: float) -> Cut | None:
        """The cut for a history of ``sizes`` in ``room`` (None: none is enough).

        The first grid point leaving the history within ``room``, and no earlier
        than the cut each of ``settled`` needed.
        """
        grid = self.grid
        saved = _less_held(sizes.saved, self.held_results)
        need = max(sizes.size, sizes.peak) - room
        own = _first_fit(grid, saved, sizes.compressed, need)
        if own >= len(grid):
            return None
        dropped = max(grid[own][0], self.limit)
        for size, done, at in reversed(self.peaks):
            cap = self._cap(at)
            if cap <= dropped:
                break  # earlier ones could drop no more than this (caps grow)
            g = _first_fit(grid, saved, done, size - room)
            dropped = max(dropped, min(grid[g][0] if g < len(grid) else cap, cap))
        later = tuple(map(itemgetter(0), grid[bisect_left(grid, (dropped,)) :]))
        return Cut(self.units, dropped, later, self.protected)


def plan_cut(
    messages: Sequence[BaseMessage],
    costs: Sequence[Costs],
    *,
    quantum: float,
    keep: int = 0,
    batch: int = 0,
    keep_first_user: bool = True,
    turn_limit: int | None = None,
    codes: str | None = None,
    lead: int = 0,
    held: Plan | None = None,
) -> tuple[Plan, Sizes]:
    """The plan and sizes of a history (module docstring).

    ``costs`` describe each message (``Costs``); compression runs as ``Sizes``
    says with ``keep`` and ``batch``; grid points lie every ``quantum`` tokens of
    droppable history as written; ``turn_limit`` sets a lower bound; ``lead``
    counts what is sent besides the messages (the placeholder first turn).
    ``codes``: the messages' ``_trim_units.kinds``, when the caller kept them;
    pinned messages are held with their pairs (``hold_pins``), as protected.
    ``held``: the plan of an earlier pruning; what it found for the messages
    that did not change since (the very same costs, the same kinds) is kept, and
    the rest is read, so a plan costs what changed (the same plan either way).
    """
    codes = hold_pins(kinds(messages) if codes is None else codes)
    if held is not None and held.keep_first_user != keep_first_user:
        held = None
    before = None if held is None else (held.codes, held.units)
    units = units_from(codes, keep_first_user, before)
    path = trail(costs, keep, batch, lead, None if held is None else held.trail)
    points: Sequence[tuple[int, int, int]] = ()
    same = 0  # leading units that are the very same, their costs unchanged
    if held is not None and held.quantum == quantum and path.changed:
        points, old = held.grid, held.units
        same = next(compress(count(), map(is_not, units, old)), len(old))
        same = min(same, len(units), bisect_left(units, path.changed, key=_last))
    grid = grid_from(units, costs, quantum, points, same)
    limit = 0
    if turn_limit is not None:
        users = positions(codes, "U")
        if len(users) > turn_limit:
            limit = bisect_left(units, users[-turn_limit], key=_last)
    kept = protected(codes, keep_first_user)
    plan = Plan(
        units,
        grid,
        path.settled,
        limit,
        kept,
        codes,
        quantum,
        keep_first_user,
        path,
        _held_results(kept, costs, units),
    )
    return plan, Sizes(keep, batch, path.raw, path.saved)


def _held_results(
    kept: Sequence[int], costs: Sequence[Costs], units: Sequence[tuple[int, ...]]
) -> tuple[int, ...]:
    """Ordinals of the results at ``kept`` positions before the last unit's end.

    Only ``drop_last`` calls and pins put kept results between droppable units;
    without them this is empty and costs one scan of ``kept``.
    """
    end = units[-1][-1] if units else -1
    inside = [i for i in kept if i < end and costs[i][2]]
    if not inside:
        return ()
    ordinals = list(accumulate((c[2] for c in costs[:end]), initial=0))
    return tuple(ordinals[i] for i in inside)


def _less_held(saved: tuple[int, ...], held: tuple[int, ...]) -> Sequence[int]:
    """``saved`` less the held results' share: what a cut's dropped results saved.

    ``saved[n]`` is what compressing the first n results saves; the held ones
    are not dropped with the units around them.
    """
    if not held:
        return saved
    out, minus, j = list(saved), 0, 0
    for n in range(1, len(saved)):
        while j < len(held) and held[j] < n:
            if held[j] + 1 < len(saved):
                minus += saved[held[j] + 1] - saved[held[j]]
            j += 1
        out[n] = saved[n] - minus
    return out


def _first_fit(
    grid: list[tuple[int, int, int]], saved: Sequence[int], done: int, need: float
) -> int:
    """Index of the first grid point dropping ``need`` tokens (``len(grid)``: none).

    What a grid point drops is its tokens as written, less what compressing the
    first ``done`` results saved on the results it drops.
    """
    low, high = 0, len(grid)
    while low < high:
        mid = (low + high) // 2
        _, written, results = grid[mid]
        if written - saved[min(done, results)] >= need:
            high = mid
        else:
            low = mid + 1
    return low
