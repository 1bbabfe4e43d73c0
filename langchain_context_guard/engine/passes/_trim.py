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
from .._policy import GuardPolicy
from .._result_keys import Naming, naming, pointer, result_ordinals
from .._tool_policy import (
    last_tools,
    result_caps,
    supersede_keys,
    whole_tools,
)
from ..tokens._anchor import Gauge
from ..tokens._counters import REPLY_OVERHEAD
from ._compress import compressor, squeezer
from ._hygiene import history_start, hygiene_tokens, opens_with_user
from ._repair import call_name
from ._supersede import superseded_reads
from ._text import truncate_text
from ._thinking import fit_answers
from ._trim_costs import message_costs
from ._trim_plan import Cut, Plan, Sizes, plan_cut
from ._trim_units import dropped_positions, held_codes, kinds

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
    named: Naming = False,
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
        named=named,
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
    named: Naming = False,
) -> tuple[list[BaseMessage], int, bool]:
    """What the cut keeps, brought within ``budget``.

    Returns the kept messages, how many units were dropped, and whether more than
    the planned cut was needed. When the kept history is still over (results not
    compressed yet), ``squeeze`` is tried first, then stripping the reasoning
    of the answers it keeps (``fit_answers``); then the cut moves on to the
    first later grid point that fits; only when nothing is left to drop are the
    largest results truncated: never one kept whole (an excluded tool's, by
    marker or by a None in ``tool_caps``); when one of those is what does not
    fit, the error names its tool. ``named`` (archived results): the marker of
    such a cut names the result's key or call id, as truncation's does.
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
        cut_down = _truncate_largest(kept, total, budget, cost, caps, named)
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
    keep_first_user: bool | None = None,
    turn_limit: int | None = None,
    step: float | None = None,
    extra_tokens: int = 0,
    scale: float = 1.0,
    margin: float | None = None,
    window: int = 0,
    measure: Measure | None = None,
    policy: GuardPolicy | None = None,
    costs_from: Sequence[BaseMessage] | None = None,
    digest: int = 0,
    hold: bool = True,
) -> list[BaseMessage]:
    """Drop the oldest whole turns until the history fits ``budget`` tokens.

    It is ``prepare``'s trim (step 7 of ``reference_prune`` calls it, through
    ``trim_history``): the same plan (``plan_cut``) and fit (``cut_to_fit``).
    System messages, summaries, the latest user message and (by default) the
    first one are always kept, and the assistant message the latest user message
    answers while anything else can go (``_trim_units.hold_answered``; when it
    cannot fit, a last try lets it go); ``turn_limit`` keeps only the last N
    user turns. A cut that leaves no user turn first counts the placeholder
    hygiene puts there.
    The cut lies on a grid of ``step * budget`` tokens of dropped history, so it
    stays put while the history grows and the kept prefix remains cacheable, and
    it never moves back (module docstring). If dropping is not enough, the
    largest remaining tool results are truncated; if even that fails,
    ``BudgetExceededError`` says by how much. ``extra_tokens`` counts what is sent
    besides the messages (tool schemas); ``scale`` calibrates estimates against
    the provider's own counts; ``margin`` is the share of the estimate a history
    is held to be larger by when deciding what fits (the guard's
    ``uncalibrated_margin``; ``safety_margin`` once usage calibrates).
    ``measure``, when given, is the caller's count of a whole candidate history
    (e.g. usage-anchored) and decides what fits; ``window`` is named in the error.

    ``policy``: the trim then does what ``prepare``'s does at that policy, so a
    guard with it whose other passes leave the history alone sends what this
    returns. It weighs each old tool result at its compressed size for good (the
    policy's compression, ``keep_recent_tool_results``, ``compress_batch``,
    superseded reads), squeezes what it keeps by compressing every old result
    before it drops more, keeps the calls of ``drop_last`` tools while anything
    else can go (``hold=False``: drops them, and the question, like the rest, as
    ``prepare``'s last try does when keeping them does not fit; with
    ``hold=True`` a last try does so here), never cuts a result
    that a tool's policy keeps whole, and counts what hygiene adds (the
    placeholder first turn). ``keep_first_user``, ``step``, ``margin`` and
    ``turn_limit`` left None are the policy's (``keep_first_user``,
    ``trim_step``, ``uncalibrated_margin``, ``history_limit``), and ``window``
    (which sets the compression floor) left 0 is its ``context_window`` (else
    ``default_context_window``). The cut is then planned on the largest size
    the history had even when it fits now, as ``prepare``'s is. Without a
    policy, a history that fits is returned as it is, each message is weighed as
    written, and the defaults are ``keep_first_user=True``, ``step=0.15``,
    ``margin=0``.

    ``costs_from``: the history the plan weighs each message in, message for
    message (default: ``messages``); ``prepare`` passes it as truncated, before
    compression, so the grid stays where it was as results are compressed.
    ``digest``: tokens to leave free when turns must be dropped (``prepare``'s
    digest of their calls goes there).

    The total counts ``REPLY_OVERHEAD`` (3 tokens priming the reply), so unlike
    ``trim_messages``' ``max_tokens`` a budget equal to the messages' own sum is 3
    short: the oldest turn goes, or ``BudgetExceededError`` when none can.
    """
    trim = partial(
        trim_history,
        messages,
        budget=budget,
        token_counter=token_counter,
        keep_first_user=keep_first_user,
        turn_limit=turn_limit,
        step=step,
        extra_tokens=extra_tokens,
        scale=scale,
        margin=margin,
        window=window,
        measure=measure,
        policy=policy,
        costs_from=costs_from,
        digest=digest,
    )
    try:
        return trim(hold=hold)[0]
    except BudgetExceededError:
        if not hold:
            raise
        return trim(hold=False)[0]  # the last try: what it held goes like the rest


def trim_history(
    messages: Sequence[BaseMessage],
    *,
    budget: int,
    token_counter: Counter,
    keep_first_user: bool | None = None,
    turn_limit: int | None = None,
    step: float | None = None,
    extra_tokens: int = 0,
    scale: float = 1.0,
    margin: float | None = None,
    window: int = 0,
    measure: Measure | None = None,
    policy: GuardPolicy | None = None,
    costs_from: Sequence[BaseMessage] | None = None,
    digest: int = 0,
    hold: bool = True,
    ordinals: Mapping[str, int] | None = None,
) -> tuple[list[BaseMessage], Trimmed]:
    """``trim_to_budget`` (its docstring), and what it decided.

    ``Trimmed.gone`` lists the indices of the messages it dropped, which
    ``prepare``'s digest notes the calls of. ``messages`` itself (when a list)
    is returned when nothing was cut. ``ordinals``: archived results' keys
    (``Setting.ordinals``; default: ``result_ordinals(messages)``).
    """
    p = policy
    keep_first_user, turn_limit, step, margin, window = _settings(
        p, keep_first_user, turn_limit, step, margin, window
    )
    source: list[BaseMessage] = list(messages)
    weighed = source if costs_from is None else list(costs_from)
    _check(turn_limit, margin, digest, len(weighed) - len(source))
    count = token_counter
    gauge = Gauge(scale, extra_tokens + REPLY_OVERHEAD, margin=margin)
    opened = opens_with_user(source)

    def total_of(msgs: list[BaseMessage]) -> int:
        if measure is not None:
            return measure(msgs)
        if p is None:  # the placeholder hygiene puts first when a cut leaves none
            added = 0 if opens_with_user(msgs) else count(history_start(opened))
        else:
            added = hygiene_tokens(msgs, count, removed=opened)
        return gauge.planned(sum(map(count, msgs)) + added, 0)

    compress: Callable[[BaseMessage], BaseMessage] = _as_is
    assistant, newer = False, None
    if p is not None:  # the policy's compression
        if p.archived_results and ordinals is None:
            ordinals = result_ordinals(source)
        compress, assistant = compressor(p, window, ordinals), p.compress_assistant_text
        newer = superseded_reads(weighed, supersede_keys(p), whole_tools(p))
    named = naming(p is not None and p.archived_results, ordinals)
    codes = kinds(source)
    if hold:  # drop_last calls, the newest reply, the question a reply answers
        tools = () if p is None else last_tools(p)
        codes = held_codes(source, codes, tools, p is not None and p.keep_reply)
    lead = 0 if opened else count(history_start(False))
    twins: dict[str, int] = {}
    costs = [
        message_costs(weighed, i, count, compress, assistant, twins, newer, named)
        for i in range(len(weighed))
    ]
    plan, sizes = plan_cut(
        source,
        costs,
        quantum=step * budget,
        keep=0 if p is None else p.keep_recent_tool_results,
        batch=0 if p is None else p.compress_batch,
        keep_first_user=keep_first_user,
        turn_limit=turn_limit,
        codes=codes,
        lead=lead,
    )
    room = gauge.room(budget)
    if p is None and total_of(source) <= budget:
        room = math.inf  # a history that fits is kept as it is
    kept, trimmed = cut_to_fit(
        source,
        plan,
        sizes,
        room=room,
        budget=budget,
        measure=total_of,
        cost=lambda m: gauge.cost(count(m)),
        window=window,
        squeeze=None if p is None else squeezer(p, window, ordinals),
        tool_caps=None if p is None else result_caps(p),
        cut_room=gauge.room(budget - digest) if digest else None,
        cut_budget=budget - digest,
        named=named,
    )
    if kept is source and isinstance(messages, list):
        kept = messages
    return kept, trimmed


def _settings(
    p: GuardPolicy | None,
    keep_first_user: bool | None,
    turn_limit: int | None,
    step: float | None,
    margin: float | None,
    window: int,
) -> tuple[bool, int | None, float, float, int]:
    """The trim's settings: each given one, else the policy's, else the default."""
    if keep_first_user is None:
        keep_first_user = True if p is None else p.keep_first_user
    if turn_limit is None and p is not None:
        turn_limit = p.history_limit
    if step is None:
        step = 0.15 if p is None else p.trim_step
    if margin is None:
        margin = 0.0 if p is None else p.uncalibrated_margin
    if p is not None and not window:
        window = p.context_window or p.default_context_window
    return keep_first_user, turn_limit, step, margin, window


def _check(turn_limit: int | None, margin: float, digest: int, unmatched: int) -> None:
    """Refuse what ``trim_to_budget`` cannot trim at, naming the fix."""
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
    if digest < 0:
        raise ConfigError(
            f"trim_to_budget: digest must be at least 0 (got {digest}).",
            field="digest",
            hint="pass the tokens to leave for a digest, or 0 for none.",
        )
    if unmatched:
        raise ConfigError(
            "trim_to_budget: costs_from must hold one message for each message "
            f"(it has {unmatched:+d}).",
            field="costs_from",
            hint="pass the same history before the passes that rewrote it, or None.",
        )


def _as_is(message: BaseMessage) -> BaseMessage:
    """No compression: without a policy the trim weighs each message as it is."""
    return message


def _truncate_largest(
    work: list[BaseMessage],
    total: int,
    budget: int,
    cost: Counter,
    caps: Mapping[str, int | None] | None = None,
    named: Naming = False,
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
        half = chars // 2 - 50
        source = pointer(out[i], named)
        cut = truncate_text(text, chars, half, half, source, original=size)
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
