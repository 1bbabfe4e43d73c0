"""Pass 5: trim to the token budget by dropping whole turns, oldest first."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from ._errors import BudgetExceededError
from ._messages import is_summary, is_user, text_of, with_marker
from ._text import truncate_text
from ._tokens import REPLY_OVERHEAD

Counter = Callable[[BaseMessage], int]


def _protected(messages: Sequence[BaseMessage], keep_first_user: bool) -> set[int]:
    keep = {
        i
        for i, m in enumerate(messages)
        if isinstance(m, SystemMessage) or is_summary(m)
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
    """Message indices in the order they may be dropped, as indivisible units.

    Older turns go whole (a user message and everything answering it); the turn
    holding the kept first user message and the latest turn give up their
    assistant + tool-result groups one at a time, and the latest group is kept.
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
            units.extend(groups[:-1] if last_turn else groups)
        else:
            units.append(turn)
    return units


def _limit_turns(
    messages: Sequence[BaseMessage], turn_limit: int, keep_first_user: bool
) -> list[BaseMessage]:
    users = [i for i, m in enumerate(messages) if is_user(m)]
    if len(users) <= turn_limit:
        return list(messages)
    cut = users[-turn_limit]
    keep = _protected(messages, keep_first_user)
    return [m for i, m in enumerate(messages) if i >= cut or i in keep]


def trim_to_budget(
    messages: Sequence[BaseMessage],
    *,
    budget: int,
    token_counter: Counter,
    keep_first_user: bool = True,
    turn_limit: int | None = None,
    step: float = 0.15,
    extra_tokens: int = 0,
    scale: float = 1.0,
    window: int = 0,
    measure: Callable[[list[BaseMessage]], int] | None = None,
) -> list[BaseMessage]:
    """Drop the oldest whole turns until the history fits ``budget`` tokens.

    System messages, summaries, the latest user message and (by default) the first
    one are always kept. ``turn_limit`` keeps only the last N user turns (seed 004).
    Drops happen in steps of ``step * budget`` tokens, so the cut point stays put
    while the history grows and the kept prefix remains cacheable. If dropping is
    not enough, the largest remaining tool results are truncated; if even that
    fails, ``BudgetExceededError`` says by how much. ``extra_tokens`` counts what
    is sent besides the messages (tool schemas); ``scale`` calibrates estimates
    against the provider's own counts. ``measure``, when given, is the caller's
    count of a whole candidate history (e.g. usage-anchored) and decides what fits.
    """
    source: list[BaseMessage] = list(messages)
    work = (
        source
        if turn_limit is None
        else _limit_turns(source, turn_limit, keep_first_user)
    )

    def cost(m: BaseMessage) -> int:
        return math.ceil(token_counter(m) * scale)

    def total_of(msgs: list[BaseMessage]) -> int:
        if measure is not None:
            return measure(msgs)
        return sum(cost(m) for m in msgs) + extra_tokens + REPLY_OVERHEAD

    total = total_of(work)
    if total > budget:
        work, total = _drop_units(
            work, total, budget, step, keep_first_user, cost, total_of
        )
        if total > budget:
            work, total = _truncate_largest(work, total, budget, cost)
            if measure is not None:
                total = measure(work)
        if total > budget:
            raise BudgetExceededError(
                total,
                budget,
                window,
                "The system prompt, the kept user messages and the latest step",
            )
    if len(work) == len(source) and all(
        a is b for a, b in zip(work, source, strict=True)
    ):
        return messages if isinstance(messages, list) else source
    return work


def _drop_units(
    work: list[BaseMessage],
    total: int,
    budget: int,
    step: float,
    keep_first_user: bool,
    cost: Counter,
    total_of: Callable[[list[BaseMessage]], int],
) -> tuple[list[BaseMessage], int]:
    """Drop droppable units, oldest first, a whole number of steps at a time.

    Dropping exactly what is over would move the cut point on every call; in steps
    of ``step * budget`` tokens it moves once per step's worth of new history.
    """
    quantum = step * budget
    units = iter(droppable_units(work, keep_first_user))
    drop: set[int] = set()
    candidate = work
    while total > budget:
        needed = total - budget
        target = math.ceil(needed / quantum) * quantum if quantum >= 1 else needed
        dropped = 0
        for unit in units:
            drop.update(unit)
            dropped += sum(cost(work[i]) for i in unit)
            if dropped >= target:
                break
        if not dropped:
            break
        candidate = [m for i, m in enumerate(work) if i not in drop]
        total = total_of(candidate)
    return candidate, total


def _truncate_largest(
    work: list[BaseMessage], total: int, budget: int, cost: Counter
) -> tuple[list[BaseMessage], int]:
    """Cut the largest remaining tool results until the history fits."""
    work = list(work)
    for _ in range(len(work)):
        if total <= budget:
            break
        tools = [(cost(m), i) for i, m in enumerate(work) if isinstance(m, ToolMessage)]
        if not tools:
            break
        tokens, i = max(tools)
        text = text_of(work[i].content)
        keep_tokens = tokens - (total - budget) - 16
        if keep_tokens < 64 or len(text) < 400:
            break
        chars = max(int(len(text) * keep_tokens / tokens * 0.9) - 200, 200)
        cut = truncate_text(text, chars, chars // 2 - 50, chars // 2 - 50)
        new = with_marker(work[i], "truncated", content=cut, original_chars=len(text))
        total += cost(new) - tokens
        work[i] = new
    return work, total
