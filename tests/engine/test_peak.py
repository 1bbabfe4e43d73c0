"""``_trim_sizes``: the walk, and a trail grown from the last, equal to the
per-message walk it replaced, on random costs."""

from __future__ import annotations

from bisect import bisect_left
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_context_guard.engine.passes import _trim_sizes as _peak
from langchain_context_guard.engine.passes._compress import compress_boundary
from langchain_context_guard.engine.passes._trim_sizes import highest, trail, walk


def _reference(costs, keep, batch, raw, saved, peak, settled=None, ends=()):
    """The walk as first written (every result checks the boundary and its group)."""
    done = compress_boundary(len(saved) - 1, keep, batch) if batch else 0
    group: list[tuple[int, int, int]] = []
    for i, (cost, compressed, is_result, twin) in enumerate((*costs, (0, 0, False, 0))):
        if group and not is_result:
            top = highest(group, raw - saved[done], len(saved) - len(group), done)
            if top and settled is not None:
                settled.append((top, done, bisect_left(ends, i - len(group) - 1)))
            peak = max(peak, top)
            group = []
        if is_result and batch and compress_boundary(len(saved), keep, batch) > done:
            if settled is not None:
                settled.append((raw - saved[done], done, bisect_left(ends, i)))
            peak = 0
        raw += cost
        if is_result:
            saved.append(saved[-1] + cost - compressed)
            done = compress_boundary(len(saved) - 1, keep, batch) if batch else 0
            group.append((cost, compressed, twin))
    return raw, 0 if settled is not None else peak


@st.composite
def _costs(draw):
    out = []
    for _ in range(draw(st.integers(0, 40))):
        cost = draw(st.integers(1, 60))
        is_result = draw(st.booleans())
        compressed = draw(st.integers(-20, cost)) if is_result else cost
        twin = draw(st.sampled_from([0, 5, 35])) if is_result else 0
        out.append((cost, compressed, is_result, twin))
    return out


@settings(max_examples=400, deadline=None, database=None)
@given(
    _costs(),
    _costs(),
    st.integers(0, 6),
    st.integers(0, 4),
    st.booleans(),
)
def test_walk_equals_the_per_message_walk(first, more, keep, batch, plan):
    ends = sorted({i for i in range(len(first) + len(more)) if i % 3 == 2})
    got_saved, ref_saved = [0], [0]
    got_settled: list | None = [] if plan else None
    ref_settled: list | None = [] if plan else None
    got = walk(first, keep, batch, 0, got_saved, 0, got_settled, ends)
    ref = _reference(first, keep, batch, 0, ref_saved, 0, ref_settled, ends)
    assert (got, got_saved, got_settled) == (ref, ref_saved, ref_settled)
    # grown on from there, as ``Sizes.grow`` does between prunings
    got = walk(more, keep, batch, got[0], got_saved, got[1])
    ref = _reference(more, keep, batch, ref[0], ref_saved, ref[1])
    assert (got, got_saved) == (ref, ref_saved)


@st.composite
def _edit(draw, costs):
    """``costs`` kept up to a random point (the very same objects), then new ones."""
    keep = draw(st.integers(0, len(costs)))
    return [*costs[:keep], *draw(_costs())]


@settings(max_examples=120, deadline=None, database=None)
@given(
    st.data(),
    _costs(),
    st.integers(0, 6),
    st.integers(0, 4),
    st.integers(0, 9),
    st.lists(st.integers(0, 90), max_size=30).map(sorted),
)
def test_a_trail_grown_from_the_last_equals_the_per_message_walk(
    data, first, keep, batch, lead, ends
):
    """``trail`` walks only from the last mark before the first cost that is not
    the very same object; three histories in a row, each an edit of the last
    (cut back anywhere, then new costs), equal the walk of every message."""
    held = None
    costs = first
    with patch.object(_peak, "SPACING", data.draw(st.integers(1, 5))):
        for _ in range(3):
            got = trail(costs, keep, batch, lead, held)
            ref_saved: list[int] = [0]
            ref_settled: list = []
            raw, _ = _reference(
                costs, keep, batch, lead, ref_saved, 0, ref_settled, ends
            )
            assert (got.raw, list(got.saved)) == (raw, ref_saved)
            at = [(s, d, bisect_left(ends, i)) for s, d, i in got.settled]
            assert at == ref_settled
            assert all(not costs[i][2] for i, *_ in got.marks)  # no open call
            held, costs = got, data.draw(_edit(costs))
