"""The trim plan's inputs at C speed: one character per message, units from that.

``_trim.plan_cut`` runs over the whole history each time the cut moves, so at
50,000 messages every per-message step in Python shows. Here a history is read
once into a string of kinds (``kinds``), and the droppable units, the user turns
and the compression batches are found in it with string and regex scans, slices
and prefix sums. ``units_from(kinds(m), k)`` equals the per-message reference in
``tests/engine/test_units.py`` (checked on random histories). ``carried`` keeps
such per-message results from one pruning to the next (``_pipeline.Run.memo``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left
from collections.abc import Callable, Sequence
from itertools import accumulate, chain, compress
from operator import is_not, itemgetter
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ._messages import MARKER_KEY, is_user
from ._thinking import has_reasoning

SYSTEM, USER, AI, TOOL, OTHER = "S", "U", "A", "T", "O"
"""Kinds: kept by trimming (a system message or a summary), a real user turn
(``_messages.is_user``), an assistant message, a tool result, anything else."""

_GROUP = re.compile(r"[AT]T*|[^AT]")
"""An assistant message (or a stray result) with the results that follow it."""


_PLAIN = {
    SystemMessage: SYSTEM,
    HumanMessage: USER,
    AIMessage: AI,
    ToolMessage: TOOL,
}
"""Kinds of the core classes when the guard left no marker (the common case)."""


def kind(message: BaseMessage) -> str:
    """One message's kind (``SYSTEM``, ``USER``, ``AI``, ``TOOL``, ``OTHER``)."""
    kwargs = message.additional_kwargs
    if not kwargs or MARKER_KEY not in kwargs:
        plain = _PLAIN.get(type(message))
        if plain is not None:
            return plain
    if isinstance(message, SystemMessage):
        return SYSTEM
    mark = message.additional_kwargs.get(MARKER_KEY)
    marked = mark.get("kind") if isinstance(mark, dict) else None
    if marked in ("summary", "placeholder"):  # kept, as by ``_trim._protected``
        return SYSTEM
    if isinstance(message, HumanMessage):
        return OTHER if marked == "digest" else USER
    if isinstance(message, AIMessage):
        return AI
    if isinstance(message, ToolMessage):
        return TOOL
    return OTHER


def kinds(messages: Sequence[BaseMessage]) -> str:
    """Every message's kind, in order."""
    return "".join(map(kind, messages))


def positions(codes: str, code: str) -> list[int]:
    """Where ``code`` occurs in ``codes``."""
    return [m.start() for m in re.finditer(code, codes)]


def units_from(codes: str, keep_first_user: bool) -> list[tuple[int, ...]]:
    """The droppable units of the history whose kinds are ``codes``.

    Message indices in the order they may be dropped, as indivisible units.
    Older turns go whole (a user message and everything answering it); the turn
    holding the kept first user message and the latest turn give up their
    assistant + tool-result groups one at a time, and the latest group after the
    latest user message is kept. System messages, summaries and the placeholder
    first turn are never dropped.

    Each unit a tuple: tuples of ints leave the garbage collector's lists, so the
    plan a guard keeps does not bring on full collections (half a second at
    50,000 messages).
    """
    n = len(codes)
    users = positions(codes, USER)
    kept = positions(codes, SYSTEM)
    if users:
        kept.append(users[-1])
        if keep_first_user:
            kept.append(users[0])
        kept = sorted(set(kept))
    bounds = [0, *users[1:], n] if users else [0, n]
    units: list[tuple[int, ...]] = []
    last = len(bounds) - 2
    for t in range(last + 1):
        a, b = bounds[t], bounds[t + 1]
        idx, sub = _free(codes, a, b, kept[bisect_left(kept, a) : bisect_left(kept, b)])
        if not idx:
            continue
        # Only the first turn can hold a kept user message besides the last one.
        if t == last or (t == 0 and keep_first_user and bool(users)):
            groups = [idx[m.start() : m.end()] for m in _GROUP.finditer(sub)]
            latest = t == last and (not users or groups[-1][-1] > users[-1])
            units.extend(groups[:-1] if latest else groups)
        else:
            units.append(idx)
    return units


def _free(codes: str, a: int, b: int, kept: list[int]) -> tuple[tuple[int, ...], str]:
    """Indices in ``[a, b)`` that are not ``kept`` (sorted), and their kinds."""
    if not kept:
        return tuple(range(a, b)), codes[a:b]
    idx: list[int] = []
    parts: list[str] = []
    start = a
    for k in kept:
        idx.extend(range(start, k))
        parts.append(codes[start:k])
        start = k + 1
    idx.extend(range(start, b))
    parts.append(codes[start:b])
    return tuple(idx), "".join(parts)


def grid_points(
    units: Sequence[Sequence[int]],
    raw: Sequence[int],
    results: Sequence[int],
    quantum: float,
) -> list[tuple[int, int, int]]:
    """``_trim.Plan.grid``: (units dropped, their tokens as written, results).

    ``raw``: prefix sums of the messages' tokens as written; ``results``: prefix
    counts of tool results.
    """
    grid: list[tuple[int, int, int]] = [(0, 0, 0)]
    written, mark = 0, quantum
    every = quantum < 1
    for k, unit in enumerate(units, start=1):
        first, end = unit[0], unit[-1] + 1
        if end - first == len(unit):
            written += raw[end] - raw[first]
        else:
            written += sum(raw[i + 1] - raw[i] for i in unit)
        if every or written >= mark:
            grid.append((k, written, results[end]))
            if not every:
                mark = (math.floor(written / quantum) + 1) * quantum
    return grid


def prefix_sums(values: Sequence[tuple[int, ...]], item: int) -> list[int]:
    """Prefix sums of one field of ``values`` (0 first)."""
    return list(accumulate(map(itemgetter(item), values), initial=0))


def reasoning_kind(message: BaseMessage) -> str:
    """A message's kind for ``_stages.strip_step``.

    ``R`` an assistant message with reasoning, ``A`` another, ``T`` a tool
    result, ``U`` a user turn, ``O`` anything else.
    """
    if isinstance(message, AIMessage):
        return "R" if has_reasoning(message) else AI
    if isinstance(message, ToolMessage):
        return TOOL
    return USER if is_user(message) else OTHER


def dropped_positions(units: Sequence[Sequence[int]], dropped: int) -> list[int]:
    """Indices of the first ``dropped`` units, in order."""
    return sorted(chain.from_iterable(units[:dropped]))


def kept_positions(
    units: Sequence[Sequence[int]], dropped: int, length: int
) -> list[int]:
    """Indices below ``length`` outside the first ``dropped`` units, in order.

    Units come in index order, so everything after the last dropped index stays;
    before it only the protected messages do (a set difference at C speed).
    """
    gone = dropped_positions(units, dropped)
    if not gone:
        return list(range(length))
    last = gone[-1] + 1
    return [*sorted(set(range(last)).difference(gone)), *range(last, length)]


def carried(
    messages: list[BaseMessage],
    held: tuple[list[BaseMessage], list[Any]] | None,
    each: Callable[[BaseMessage], Any],
) -> list[Any]:
    """``each`` of every message, reusing ``held`` results where the object is the same.

    ``held`` pairs an earlier list with its results; only the messages that are
    not the very objects at the same place, and the ones past its end, are
    computed (found at C speed), so a pruning whose history moved only at a few
    places (a compression batch, the new messages) costs what moved.
    """
    if held is None:
        return list(map(each, messages))
    old, results = held
    m = min(len(old), len(messages))
    out = results[:m]
    for i in compress(range(m), map(is_not, messages, old)):
        out[i] = each(messages[i])
    out.extend(map(each, messages[m:]))
    return out


def carried_at(
    messages: list[BaseMessage],
    held: tuple[list[BaseMessage], list[Any]] | None,
    each: Callable[[list[BaseMessage], int], Any],
) -> list[Any]:
    """``carried`` for a result that also depends on the messages before it.

    ``each(messages, i)`` may read back to the previous tool result (a result's
    cost for good counts its callers' compression; ``_pipeline.Run._costs``):
    a message that moved also recomputes the messages after it through the
    next group of tool results.
    """
    if held is None:
        return [each(messages, i) for i in range(len(messages))]
    old, results = held
    m = min(len(old), len(messages))
    out = results[:m]
    upto = -1
    for i in compress(range(m), map(is_not, messages, old)):
        j = max(i, upto + 1)
        if j >= m:
            break
        seen = False  # through the first run of results after the one that moved
        while j < m:
            is_result = j > i and isinstance(messages[j], ToolMessage)
            if seen and not is_result:
                break
            seen = seen or is_result
            out[j] = each(messages, j)
            j += 1
        upto = j - 1
    out.extend(each(messages, i) for i in range(m, len(messages)))
    return out
