"""Pass 5: trim to the token budget by dropping whole turns, oldest first.

Where the history is cut must not move back as it grows: a cut that moves back
re-sends messages dropped on the previous call, and each such call misses the
provider's prompt cache entirely. The history's size drops now and then as it
grows (a compression batch; a real result smaller than the synthetic one sent for
its open call), so the cut is planned on the *peak*: the largest size any prefix
of the history had (``_trim_sizes``), which only grows. What is
dropped is counted at what each message costs for good (old tool results end up
compressed), and cut points lie on a fixed grid: the unit boundaries where that
cost of the dropped prefix first reaches a multiple of ``step * budget``. The cut
is the first grid point that leaves the peak within the budget; a longer history
has a higher peak, so the cut only moves forward. Since the history never
exceeds its peak, what is kept fits.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from langchain_core.messages import BaseMessage, ToolMessage

from .._errors import BudgetExceededError, ConfigError
from .._messages import kept_whole, original_size, text_of, with_marker
from .._pins import count_pinned
from ..tokens._anchor import Gauge
from ..tokens._counters import REPLY_OVERHEAD
from ._repair import call_name
from ._text import truncate_text
from ._thinking import fit_answers
from ._trim_costs import message_costs
from ._trim_plan import Cut, Plan, Sizes, plan_cut
from ._trim_units import dropped_positions

Counter = Callable[[BaseMessage], int]
Measure = Callable[[list[BaseMessage]], int]
Squeeze = Callable[[list[BaseMessage]], list[BaseMessage]]


@dataclass(frozen=True, slots=True)
class Trimmed:
    """What a trim decided: its plan, the history's sizes, the units it dropped.

    ``more``: the planned cut was not enough (``fit_cut`` moved on, squeezed, or
    no grid point fit).
    """

    plan: Plan
    sizes: Sizes
    dropped: int
    more: bool

    @property
    def gone(self) -> list[int]:
        """Indices of the messages the trim dropped, in order."""
        return dropped_positions(self.plan.units, self.dropped)


def cut_to_fit(
    messages: list[BaseMessage],
    plan: Plan,
    sizes: Sizes,
    *,
    room: float,
    budget: int,
    measure: Measure,
    cost: Counter,
    window: int = 0,
    squeeze: Squeeze | None = None,
    tool_caps: Mapping[str, int | None] | None = None,
    cut_room: float | None = None,
    cut_budget: int | None = None,
) -> tuple[list[BaseMessage], Trimmed]:
    """The trim's fit: ``plan``'s cut for ``room``, what it keeps within ``budget``.

    A history that fits ``room`` is kept whole (``messages`` itself); one that
    must be cut is cut to ``cut_room`` / ``cut_budget`` when given (room left
    for the digest). ``fit_cut`` brings what the cut keeps within the budget.
    """
    cut = plan.cut(sizes, room)
    if (cut is None or cut.dropped) and cut_room is not None:
        cut = plan.cut(sizes, cut_room)
        budget = budget if cut_budget is None else cut_budget
    more = cut is None
    if cut is None:
        cut = Cut(plan.units, len(plan.units), (), plan.protected)
    fit = partial(
        fit_cut,
        messages,
        measure=measure,
        cost=cost,
        window=window,
        squeeze=squeeze,
        tool_caps=tool_caps,
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
    return kept, Trimmed(plan, sizes, dropped, more or beyond)


def fit_cut(
    messages: list[BaseMessage],
    cut: Cut,
    *,
    budget: int,
    measure: Measure,
    cost: Counter,
    window: int = 0,
    squeeze: Squeeze | None = None,
    tool_caps: Mapping[str, int | None] | None = None,
) -> tuple[list[BaseMessage], int, bool]:
    """What the cut keeps, brought within ``budget``.

    Returns the kept messages, how many units were dropped, and whether more than
    the planned cut was needed. When the kept history is still over (results not
    compressed yet), ``squeeze`` is tried first, then stripping the reasoning
    of the answers it keeps (``fit_answers``); then the cut moves on to the
    first later grid point that fits; only when nothing is left to drop are the
    largest results truncated: never one kept whole (an excluded tool's, by
    marker or by a None in ``tool_caps``); when one of those is what does not
    fit, the error names its tool.
    """
    squeezed = False

    def attempt(dropped: int) -> tuple[list[BaseMessage], int]:
        nonlocal squeezed
        kept = cut.keep(messages, dropped)
        kept, total, squeezed = fit_answers(kept, budget, measure, squeeze)
        return kept, total

    kept, total = attempt(cut.dropped)
    if total <= budget:
        return kept, cut.dropped, squeezed
    later = [k for k in cut.grid if k > cut.dropped]
    if not later or later[-1] != len(cut.units):
        later.append(len(cut.units))
    low, high = -1, len(later) - 1  # later[high] is tried last, then bisected
    if later[high] > cut.dropped:
        kept, total = attempt(later[high])
        while total <= budget and high - low > 1:
            mid = (low + high) // 2
            fewer, fewer_total = attempt(later[mid])
            if fewer_total <= budget:
                high, kept, total = mid, fewer, fewer_total
            else:
                low = mid
    caps = tool_caps or {}
    if total > budget:
        cut_down = _truncate_largest(kept, total, budget, cost, caps)
        if cut_down is not kept:
            kept, total = cut_down, measure(cut_down)
    if total > budget:
        pins, pinned_tokens = count_pinned(kept, cost)
        raise BudgetExceededError(
            total,
            budget,
            window,
            "The system prompt, the kept user messages and the latest step",
            _largest_whole(kept, cost, caps, total - budget),
            pinned=pins,
            pinned_tokens=pinned_tokens,
        )
    return kept, max(later[high], cut.dropped), True


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
    margin: float = 0.0,
    window: int = 0,
    measure: Measure | None = None,
) -> list[BaseMessage]:
    """Drop the oldest whole turns until the history fits ``budget`` tokens.

    System messages, summaries, the latest user message and (by default) the first
    one are always kept. ``turn_limit`` keeps only the last N user turns.
    The cut lies on a grid of ``step * budget`` tokens of dropped history, so it
    stays put while the history grows and the kept prefix remains cacheable, and
    it never moves back (module docstring). If dropping is not enough, the largest
    remaining tool results are truncated; if even that fails,
    ``BudgetExceededError`` says by how much. ``extra_tokens`` counts what is sent
    besides the messages (tool schemas); ``scale`` calibrates estimates against the
    provider's own counts; ``margin`` is the share of the estimate a history is
    held to be larger by when deciding what fits (the guard's
    ``uncalibrated_margin``; ``safety_margin`` once usage calibrates).
    ``measure``, when given, is the caller's count of a whole candidate history
    (e.g. usage-anchored) and decides what fits.

    It is ``prepare``'s trim: the same plan (``plan_cut``) and fit
    (``cut_to_fit``), so a guard whose other passes leave the history alone
    (``keep_first_user``, ``trim_step=step``, ``history_limit=turn_limit``,
    ``uncalibrated_margin=margin``) sends what this returns.

    The total counts ``REPLY_OVERHEAD`` (3 tokens priming the reply), so unlike
    ``trim_messages``' ``max_tokens`` a budget equal to the messages' own sum is 3
    short: the oldest turn goes, or ``BudgetExceededError`` when none can.
    """
    if turn_limit is not None and turn_limit < 1:
        raise ConfigError(
            f"trim_to_budget: turn_limit must be at least 1 (got {turn_limit}).",
            field="turn_limit",
            hint="pass a whole number of user turns, at least 1, or None for no limit.",
        )
    if not 0 <= margin < 1:
        raise ConfigError(
            f"trim_to_budget: margin must be at least 0 and below 1 (got {margin}).",
            field="margin",
            hint="pass a share of the estimate, e.g. 0.05, or 0 for none.",
        )
    source: list[BaseMessage] = list(messages)
    gauge = Gauge(scale, extra_tokens + REPLY_OVERHEAD, margin=margin)

    def total_of(msgs: list[BaseMessage]) -> int:
        if measure is not None:
            return measure(msgs)
        return gauge.planned(sum(map(token_counter, msgs)), 0)

    twins: dict[str, int] = {}
    costs = [
        message_costs(source, i, token_counter, _as_is, False, twins)
        for i in range(len(source))
    ]
    plan, sizes = plan_cut(
        source,
        costs,
        quantum=step * budget,
        keep_first_user=keep_first_user,
        turn_limit=turn_limit,
    )
    fits = total_of(source) <= budget
    work, _ = cut_to_fit(
        source,
        plan,
        sizes,
        room=math.inf if fits else gauge.room(budget),
        budget=budget,
        measure=total_of,
        cost=lambda m: gauge.cost(token_counter(m)),
        window=window,
    )
    if work is source:
        return messages if isinstance(messages, list) else source
    return work


def _as_is(message: BaseMessage) -> BaseMessage:
    """No compression: ``trim_to_budget`` weighs each message as it is."""
    return message


def _truncate_largest(
    work: list[BaseMessage],
    total: int,
    budget: int,
    cost: Counter,
    caps: Mapping[str, int | None] | None = None,
) -> list[BaseMessage]:
    """Cut the largest remaining tool results until the history fits."""
    out = work
    for _ in range(len(work)):
        if total <= budget:
            break
        tools = [(cost(m), i) for i, m in enumerate(out) if _cuttable(m, caps)]
        if not tools:
            break
        tokens, i = max(tools)
        text = text_of(out[i].content)
        keep_tokens = tokens - (total - budget) - 16
        if keep_tokens < 64 or len(text) < 400:
            break
        chars = max(int(len(text) * keep_tokens / tokens * 0.9) - 200, 200)
        size, lines = original_size(out[i], text)
        cut = truncate_text(
            text, chars, chars // 2 - 50, chars // 2 - 50, original=size
        )
        new = with_marker(
            out[i],
            "truncated",
            content=cut,
            original_chars=size,
            original_lines=lines,
        )
        total += cost(new) - tokens
        out = list(out) if out is work else out
        out[i] = new
    return out


def _cuttable(
    message: BaseMessage, caps: Mapping[str, int | None] | None = None
) -> bool:
    if not isinstance(message, ToolMessage) or kept_whole(message):
        return False
    name = message.name
    return not caps or name is None or name not in caps or caps[name] is not None


def _largest_whole(
    kept: list[BaseMessage], cost: Counter, caps: Mapping[str, int | None], over: int
) -> str | None:
    """The tool of the largest result kept whole, if cutting it could fit the rest."""
    whole = [
        (cost(m), i)
        for i, m in enumerate(kept)
        if isinstance(m, ToolMessage) and not _cuttable(m, caps)
    ]
    if not whole or max(whole)[0] < over:
        return None
    _, i = max(whole)
    return call_name(kept, i) or "(unnamed)"
