"""The trim plan's inputs at C speed: one character per message, units from that.

``_trim.plan_cut`` runs over the whole history each time the cut moves, so at
50,000 messages every per-message step in Python shows. Here a history is read
once into a string of kinds (``kinds``), and the droppable units, the user turns
and the compression batches are found in it with string and regex scans, slices
and prefix sums. ``units_from(kinds(m), k)`` equals the per-message reference in
``tests/engine/test_units.py`` (checked on random histories). ``remap`` keeps
such per-message results from one pruning to the next (``_run.Run.memo``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Sequence
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

from .._messages import MARKER_KEY, is_pinned, is_reply, is_user
from ._provider_compaction import holds_compaction
from ._thinking import has_reasoning

SYSTEM, USER, AI, TOOL, OTHER = "S", "U", "A", "T", "O"
"""Kinds: kept by trimming (a system message or a summary), a real user turn
(``_messages.is_user``), an assistant message, a tool result, anything else."""
PINNED_AI, PINNED_TOOL = "a", "t"
"""Kinds of a pinned assistant message and a pinned tool result, until
``hold_pins`` keeps them with their pair (another pinned message is ``SYSTEM``)."""

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
    if holds_compaction(message):  # the provider's summary: kept like ours
        return SYSTEM
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
    if is_pinned(message):
        if isinstance(message, AIMessage):
            return PINNED_AI
        return PINNED_TOOL if isinstance(message, ToolMessage) else SYSTEM
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


def hold_calls(
    messages: Sequence[BaseMessage], codes: str, tools: Collection[str]
) -> str:
    """``codes`` with the calls to ``tools`` and their results kept like ``SYSTEM``.

    An assistant message calling one of ``tools`` (``ToolPolicy.drop_last``) and
    the results that follow it are then in no droppable unit: the trim drops
    everything else first. The pair stays whole (all the message's results).
    """
    if not tools:
        return codes
    out = list(codes)
    n = len(messages)
    for i in positions(codes, AI):
        calls = messages[i].tool_calls  # type: ignore[attr-defined]
        if not any(c["name"] in tools for c in calls):
            continue
        out[i] = SYSTEM
        j = i + 1
        while j < n and codes[j] in (TOOL, PINNED_TOOL):
            out[j] = SYSTEM
            j += 1
    return "".join(out)


def hold_answered(codes: str) -> str:
    """``codes`` with the assistant message the latest user message answers kept.

    A reply ("option 3 is closest") means nothing without its question: while
    the history ends with the user's reply (no assistant message or result after
    it), the assistant message just before it, or before the user messages
    leading to it (a hook's note), is kept like ``SYSTEM``. Once the agent acts
    on the reply, the question is history like any other (the codes then differ
    from the earlier ones there, so units grown from them are read again).
    """
    last = codes.rfind(USER)
    if AI in codes[last + 1 :] or TOOL in codes[last + 1 :]:
        return codes
    start = last
    while start > 0 and codes[start - 1] == USER:
        start -= 1
    if start < 1 or codes[start - 1] != AI:
        return codes
    return f"{codes[: start - 1]}{SYSTEM}{codes[start:]}"


def awaits_answer(messages: Sequence[BaseMessage]) -> bool:
    """Whether ``messages`` end with a user message the agent has not acted on.

    Then ``hold_answered`` may hold its question, and a message added after it
    lets that go: the units change.
    """
    for message in reversed(messages):
        code = kind(message)
        if code in (AI, TOOL):
            return False
        if code == USER:
            return True
    return False


_ANSWERED = re.compile(r"[Aa](?=[US])")
"""An assistant message (pinned or not) before a user turn or a pinned message."""


def newest_reply(messages: Sequence[BaseMessage], codes: str) -> int:
    """Index of a person's newest reply to an answer in ``messages``, or -1.

    A user message right after an assistant message that made no tool call
    (``_messages.is_reply``); ``codes``: the messages' ``kinds``, which find
    the few places to look at.
    """
    for found in reversed([m.start() for m in _ANSWERED.finditer(codes)]):
        if is_reply(messages[found], messages[found + 1]):
            return found + 1
    return -1


def hold_reply(messages: Sequence[BaseMessage], codes: str) -> str:
    """``codes`` with a person's newest reply and its answer kept like ``SYSTEM``.

    ``GuardPolicy.keep_reply``: a prompt that becomes the stored history
    (persist mode) still holds the reply the interactive settings switched on.
    The latest user message is kept anyway (``protected``), the first with
    ``keep_first_user``: a reply that is either keeps its code, which they read.
    """
    j = newest_reply(messages, codes)
    if j < 1:
        return codes
    reply = codes[j]
    if reply == USER and USER in codes[:j] and USER in codes[j + 1 :]:
        reply = SYSTEM
    return f"{codes[: j - 1]}{SYSTEM}{reply}{codes[j + 1 :]}"


def held_codes(
    messages: Sequence[BaseMessage],
    codes: str,
    tools: Collection[str],
    reply: bool = False,
) -> str:
    """``codes`` with what the trim keeps while anything else can go.

    The calls of ``tools`` (``hold_calls``), with ``reply`` a person's newest
    reply and its answer (``hold_reply``), and the question the latest user
    message answers (``hold_answered``). All are let go on the last try, when
    keeping them does not fit (``Setting.hold``).
    """
    if reply:
        codes = hold_reply(messages, codes)
    return hold_answered(hold_calls(messages, codes, tools))


_PAIR = re.compile(r"[Aa][Tt]*|t")
"""An assistant message with the results that follow it, or a stray pinned result."""


def hold_pins(codes: str) -> str:
    """``codes`` with each pinned message's pair kept like ``SYSTEM``.

    A pinned assistant message or tool result (``PINNED_AI``, ``PINNED_TOOL``)
    keeps its assistant message and all the results that follow it: the pair
    stays whole, in no droppable unit, like ``hold_calls``'s.
    """
    if PINNED_AI not in codes and PINNED_TOOL not in codes:
        return codes
    return _PAIR.sub(_held, codes)


def _held(match: re.Match[str]) -> str:
    group = match.group()
    return group if group.isupper() else SYSTEM * len(group)


def positions(codes: str, code: str) -> list[int]:
    """Where ``code`` occurs in ``codes``."""
    return [m.start() for m in re.finditer(code, codes)]


def units_from(
    codes: str, keep_first_user: bool, held: HeldUnits | None = None
) -> list[tuple[int, ...]]:
    """The droppable units of the history whose kinds are ``codes``.

    Message indices in the order they may be dropped, as indivisible units.
    Older turns go whole (a user message and everything answering it); the turn
    holding the kept first user message and the latest turn give up their
    assistant + tool-result groups one at a time, and the latest group after the
    latest user message is kept. System messages, summaries and the placeholder
    first turn are never dropped (``protected``).

    Each unit a tuple: tuples of ints leave the garbage collector's lists, so the
    plan a guard keeps does not bring on full collections (half a second at
    50,000 messages). Units come in index order, each after the one before.

    ``held``: the kinds and units of an earlier history (same ``keep_first_user``);
    when ``codes`` extends it, its units before the point where they can change
    are kept and only the rest is read (``_read_history``).
    """
    n = len(codes)
    users = positions(codes, USER)
    kept = _kept(codes, users, keep_first_user)
    bounds = [0, *users[1:], n] if users else [0, n]
    last = len(bounds) - 2
    units: list[tuple[int, ...]] = []
    first, since = 0, 0
    if held is not None:
        units, first, since = _grown(codes, keep_first_user, users, bounds, held)
    for t in range(first, last + 1):
        a, b = max(bounds[t], since), bounds[t + 1]
        idx, sub = _free(codes, a, b, kept[bisect_left(kept, a) : bisect_left(kept, b)])
        if not idx:
            continue
        if _split(t, last, keep_first_user, users):
            groups = [idx[m.start() : m.end()] for m in _GROUP.finditer(sub)]
            latest = t == last and (not users or groups[-1][-1] > users[-1])
            units.extend(groups[:-1] if latest else groups)
        else:
            units.append(idx)
    return units


HeldUnits = tuple[str, Sequence[tuple[int, ...]]]
"""A history's kinds and its droppable units (``units_from``)."""


def protected(codes: str, keep_first_user: bool) -> list[int]:
    """Indices no unit holds, before the latest group: what trimming keeps, sorted."""
    return _kept(codes, positions(codes, USER), keep_first_user)


def _kept(codes: str, users: list[int], keep_first_user: bool) -> list[int]:
    kept = positions(codes, SYSTEM)
    if users:
        kept.append(users[-1])
        if keep_first_user:
            kept.append(users[0])
        kept = sorted(set(kept))
    return kept


def _split(t: int, last: int, keep_first_user: bool, users: list[int]) -> bool:
    """Whether turn ``t`` gives up its groups one at a time (``units_from``).

    Only the first turn can hold a kept user message besides the last one.
    """
    return t == last or (t == 0 and keep_first_user and bool(users))


def _grown(
    codes: str,
    keep_first_user: bool,
    users: list[int],
    bounds: list[int],
    held: HeldUnits,
) -> tuple[list[tuple[int, ...]], int, int]:
    """The units of ``held`` that stay as they were, the turn and index after them.

    A history extended unchanged keeps its turns, and what they protect but the
    latest user message of the old history once a later one came (its turn then
    no longer splits). Its units before the last one stay, each ended where the
    next one's first message begins a group: only the last unit (whose group
    may take in new results) and what follows it are read again, or the whole
    turn holding it when that turn no longer splits.
    """
    old_codes, old_units = held
    if not old_units or not codes.startswith(old_codes):
        return [], 0, 0
    since = old_units[-1][0]
    t = bisect_right(bounds, since) - 1
    if not _split(t, len(bounds) - 2, keep_first_user, users):
        since = bounds[t]
    j = bisect_left(old_units, since, key=itemgetter(0))
    return list(old_units[:j]), t, since


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
    since: tuple[int, int, int] = (0, 0, 0),
    offset: int = 0,
) -> list[tuple[int, int, int]]:
    """``_trim.Plan.grid``: (units dropped, their tokens as written, results).

    ``raw``: prefix sums of the messages' tokens as written; ``results``: prefix
    counts of tool results; both from message ``offset`` on. ``since``: a grid
    point to go on from (its units are not read again; the first point given).
    """
    grid: list[tuple[int, int, int]] = [since]
    done, written, _ = since
    every = quantum < 1
    mark = 0.0 if every else (math.floor(written / quantum) + 1) * quantum
    for k in range(done, len(units)):
        unit = units[k]
        first, end = unit[0] - offset, unit[-1] + 1 - offset
        if end - first == len(unit):
            written += raw[end] - raw[first]
        else:
            written += sum(raw[i + 1 - offset] - raw[i - offset] for i in unit)
        if every or written >= mark:
            grid.append((k + 1, written, results[end]))
            if not every:
                mark = (math.floor(written / quantum) + 1) * quantum
    return grid


def grid_from(
    units: Sequence[Sequence[int]],
    costs: Sequence[tuple[int, int, bool, int]],
    quantum: float,
    held: Sequence[tuple[int, int, int]] = (),
    same: int = 0,
) -> list[tuple[int, int, int]]:
    """``grid_points`` of ``costs`` (``_trim_sizes.Costs``), going on from ``held``.

    ``held``: an earlier grid whose points over the first ``same`` units still
    hold (the same units, their costs unchanged); only the units after its last
    such point are read.
    """
    start: list[tuple[int, int, int]] = []
    since = (0, 0, 0)
    if held:
        g = bisect_left(held, (same + 1,))  # the points of at most ``same`` units
        start, since = list(held[: g - 1]), held[g - 1]
    done = since[0]
    offset = units[done][0] if done < len(units) else len(costs)
    after = units[done - 1][-1] + 1 if done else 0
    results = since[2] + sum(map(itemgetter(2), costs[after:offset]))
    tail = costs[offset:]
    raw = list(accumulate(map(itemgetter(0), tail), initial=0))
    counts = list(accumulate(map(itemgetter(2), tail), initial=results))
    return start + grid_points(units, raw, counts, quantum, since, offset)


def reasoning_kind(message: BaseMessage) -> str:
    """A message's kind for ``_strip_step.strip_step``.

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
    units: Sequence[Sequence[int]],
    dropped: int,
    length: int,
    protected: Sequence[int] | None = None,
) -> list[int]:
    """Indices below ``length`` outside the first ``dropped`` units, in order.

    Units come in index order, so everything after the last dropped index stays;
    before it only the protected messages do: ``protected`` when given (the
    history's, ``protected``), else a set difference at C speed.
    """
    if not dropped or not units:
        return list(range(length))
    if protected is not None:
        last = units[min(dropped, len(units)) - 1][-1] + 1
        return [*protected[: bisect_left(protected, last)], *range(last, length)]
    gone = dropped_positions(units, dropped)
    last = gone[-1] + 1
    return [*sorted(set(range(last)).difference(gone)), *range(last, length)]


def remap(
    messages: list[BaseMessage],
    held: tuple[list[BaseMessage], list[Any]] | None,
    each: Callable[[BaseMessage], Any],
) -> list[Any]:
    """``each`` of every message, reusing ``held`` results where the object is the same.

    ``held`` pairs an earlier list with its results; only the messages that are
    not the very objects at the same place, and the ones past its end, are
    computed (found at C speed), so a pruning whose history moved only at a few
    places (a compression batch, the new messages) costs what moved. Held
    results of this very list are returned as they are (not to be changed).
    """
    if held is None:
        return list(map(each, messages))
    old, results = held
    if old is messages:
        return results
    m = min(len(old), len(messages))
    out = results[:m]
    for i in compress(range(m), map(is_not, messages, old)):
        out[i] = each(messages[i])
    out.extend(map(each, messages[m:]))
    return out


def remap_at(
    messages: list[BaseMessage],
    held: tuple[list[BaseMessage], list[Any]] | None,
    each: Callable[[list[BaseMessage], int], Any],
) -> list[Any]:
    """``remap`` for a result that also depends on the messages before it.

    ``each(messages, i)`` may read back to the previous tool result (a result's
    cost for good counts its callers' compression; ``_run.Run._costs``):
    a message that moved also recomputes the messages after it through the
    next group of tool results.
    """
    if held is None:
        return [each(messages, i) for i in range(len(messages))]
    old, results = held
    if old is messages:
        return results
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
