"""The stable-prefix fast path: re-send the previous prompt plus what is new.

A call whose history extends the conversation's previous one gets the previous
prompt unchanged (so the provider's prompt cache hits), with the new messages
through the per-message passes (``_order.APPENDED``), while that fits
the budget and the user-turn limit; otherwise ``reuse_prompt`` gives ``None``
and the guard prunes afresh (``_stable_prefix`` holds the pieces).
"""

from __future__ import annotations

from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from .._events import (
    Edits,
    EventKind,
    GuardEvent,
    GuardReport,
    PrepareResult,
    log_event,
    pass_event,
)
from .._messages import is_user, label
from .._policy import GuardPolicy
from .._result_keys import result_ordinals
from .._window import WindowInfo
from ..passes._hygiene import opens_with_user, tidy_message
from ..passes._provider_compaction import latest_compaction
from ..passes._sanitize import clean_message
from ..passes._truncate import truncator
from ..tokens._anchor import Gauge, Known
from ..tokens._counters import TokenCounter
from ._order import APPENDED
from ._stable_prefix import Each, Sent, append, kept_prompt_tokens


@dataclass(frozen=True)
class Limits:
    """What a reused prompt must hold to: gauge, budget, user-turn limit, window."""

    gauge: Gauge
    budget: int
    turn_limit: int | None
    info: WindowInfo
    base: Known | None = None
    """A history the call's history is known to extend (``Sent.tail``)."""
    now: Known | None = None
    """The call's history as the guard keeps it (its list, its contents)."""


@dataclass(frozen=True)
class Reused:
    """A reused prompt: the result, its tokens with extras, whether whole, to keep."""

    result: PrepareResult
    sent_tokens: int
    whole: bool
    sent: Sent


def reuse_prompt(
    stable: Sent,
    original: list[BaseMessage],
    whole_body: int,
    limits: Limits,
    policy: GuardPolicy,
    counter: TokenCounter,
    events: list[GuardEvent],
) -> Reused | None:
    """The last prompt plus the new messages, if that still fits (``_stable_prefix``).

    Appends its events to ``events``; ``None`` when the history must be pruned.
    """
    gauge, budget, turn_limit = limits.gauge, limits.budget, limits.turn_limit
    info, now = limits.info, limits.now
    tail = stable.tail(original, limits.base)
    if tail is None or latest_compaction(tail) is not None:
        return None  # a compaction block: the history now starts there
    count = counter.count_message
    each: dict[EventKind, Each] = {
        "sanitize": clean_message,
        "truncate": truncator(policy, budget, count, _ordinals(policy, original)),
        "hygiene": tidy_message,
    }
    passes = tuple((kind, each[kind]) for kind in APPENDED)
    appended = append(stable, tail, passes, count, bound=policy.bound_thinking is True)
    if appended is None:
        return None
    kept, closing = appended.messages, appended.closing
    out = [*kept, *closing]
    body = appended.body + sum(map(count, closing))
    if turn_limit is not None and sum(map(is_user, out)) > turn_limit:
        return None  # the oldest turn must go: prune afresh
    if not opens_with_user(out):
        return None  # the first turn needs its placeholder: prune afresh
    intact = stable.intact_after(out, original)
    if kept_prompt_tokens(gauge, body, intact) > budget:
        return None
    before = gauge.tokens(whole_body, len(original))
    after = gauge.tokens(body, intact)
    for kind, _ in passes:
        edits = Edits(
            tuple(appended.edits.get(kind, ())),
            tuple(appended.removed.get(kind, ())),
        )
        if edits:
            events.append(pass_event(kind, edits, before, after, budget))
    if closing:
        at = len(kept)
        added = tuple(label(m, at + i) for i, m in enumerate(closing))
        events.append(pass_event("repair", Edits(added=added), before, after, budget))
    whole = intact == len(out) == len(original)
    if not whole:
        events.append(
            GuardEvent(
                "reuse",
                tokens_before=before,
                tokens_after=after,
                budget=budget,
                detail=f"sent the previous prompt's {appended.unchanged} "
                f"messages unchanged and {len(tail)} new; what was pruned "
                "stays out until the history no longer fits",
            )
        )
    for event in events:
        if event.kind != "window_warning":
            log_event(event)
    report = GuardReport(
        tokens_before=before,
        tokens_after=after,
        budget=budget,
        context_window=info.tokens,
        window_source=info.source,
        counter=counter.name,
        events=tuple(events),
        reused=appended.unchanged,
    )
    return Reused(
        PrepareResult(list(out), report),
        body + gauge.extra,
        whole,
        Sent.of(
            stable.key,
            now.messages if now is not None else original,
            kept,
            appended.body,
            min(intact, len(kept)),
            now.contents if now is not None else None,
            base=stable.base,
            size=len(original),
            cold=stable.cold,
            shaped=None if appended.shaped is None else [*appended.shaped, *closing],
            called=appended.called,
        ),
    )


def _ordinals(
    policy: GuardPolicy, original: list[BaseMessage]
) -> dict[str, int] | None:
    """The history's result keys, which archived results' markers name."""
    return result_ordinals(original) if policy.archived_results else None
