"""Events and the report that ``ContextGuard.prepare`` returns."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage

from ._context_usage import ContextUsage
from ._messages import label

logger = logging.getLogger("langchain_context_guard")

EventKind = Literal[
    "sanitize",
    "provider_compaction",
    "bound_thinking",
    "truncate",
    "compress",
    "strip_thinking",
    "trim",
    "digest",
    "reuse",
    "repair",
    "hygiene",
    "window_warning",
    "compaction",
    "compaction_failed",
    "overflow",
    "overflow_recovery",
    "limit_ignored",
    "tokenizer_fallback",
]


@dataclass(frozen=True)
class GuardEvent:
    """One change the guard made (or one thing it noticed)."""

    kind: EventKind
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    tokens_before: int = 0
    tokens_after: int = 0
    budget: int = 0
    detail: str = ""

    def __repr__(self) -> str:
        """Counts, not ids (``to_dict`` has the ids)."""
        return (
            f"GuardEvent({self.kind!r}, changed={len(self.changed)}, "
            f"removed={len(self.removed)}, added={len(self.added)}, "
            f"tokens_before={self.tokens_before:,}, "
            f"tokens_after={self.tokens_after:,}, budget={self.budget:,})"
        )

    def describe(self) -> str:
        """One log line for this event."""
        parts = [f"Context guard: {self.kind}"]
        for what, ids in (
            ("changed", self.changed),
            ("removed", self.removed),
            ("added", self.added),
        ):
            if ids:
                parts.append(f"{what} {len(ids)} message(s)")
        if self.tokens_before or self.tokens_after:
            parts.append(
                f"tokens {self.tokens_before:,} -> {self.tokens_after:,}"
                f" (budget {self.budget:,})"
            )
        if self.detail:
            parts.append(self.detail)
        return "; ".join(parts)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of this event."""
        return {
            "kind": self.kind,
            "changed": list(self.changed),
            "removed": list(self.removed),
            "added": list(self.added),
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "budget": self.budget,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class GuardReport:
    """What one ``prepare`` call found and did."""

    tokens_before: int
    tokens_after: int
    budget: int
    context_window: int
    window_source: str
    counter: str
    events: tuple[GuardEvent, ...] = field(default_factory=tuple)
    reused: int = field(default=0, compare=False)
    """Leading messages sent exactly as on the guard's previous call (the prefix
    a provider's prompt cache can still hit); 0 on a call that pruned afresh."""

    @property
    def changed(self) -> bool:
        """Whether what is sent differs from the history given."""
        return any(
            e.changed or e.removed or e.added or e.kind == "reuse" for e in self.events
        )

    def __repr__(self) -> str:
        """Counts, not ids: a report of a long history names hundreds of messages."""
        touched: dict[str, int] = {}
        for e in self.events:
            n = len(e.changed) + len(e.removed) + len(e.added)
            touched[e.kind] = touched.get(e.kind, 0) + n
        return (
            f"GuardReport(tokens_before={self.tokens_before:,}, "
            f"tokens_after={self.tokens_after:,}, budget={self.budget:,}, "
            f"context_window={self.context_window:,} ({self.window_source}), "
            f"messages_by_event={touched}, reused={self.reused})"
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of this report."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "budget": self.budget,
            "context_window": self.context_window,
            "window_source": self.window_source,
            "counter": self.counter,
            "reused": self.reused,
            "events": [e.to_dict() for e in self.events],
        }


_ACT_ON: frozenset[EventKind] = frozenset(
    {"compaction_failed", "overflow", "limit_ignored"}
)
"""Events the user should act on: logged at WARNING."""
_NOTICE: frozenset[EventKind] = frozenset(
    {"window_warning", "compaction", "overflow_recovery", "tokenizer_fallback"}
)
"""Events worth a line at INFO; every routine pass logs at DEBUG."""


def log_event(event: GuardEvent) -> None:
    """Log an event: WARNING where the user should act, routine pruning at DEBUG.

    Truncating, trimming and compressing are what the guard is for, so they never
    warn: an agent that prunes on every call would print a warning per call.
    """
    if event.kind in _ACT_ON:
        level = logging.WARNING
    elif event.kind in _NOTICE:
        level = logging.INFO
    else:
        level = logging.DEBUG
    if logger.isEnabledFor(level):
        logger.log(level, event.describe())


@dataclass(frozen=True, slots=True)
class Edits:
    """What one pass did, as event labels (``_messages.label``).

    ``changed``: rewritten or moved messages, by output position; ``removed``:
    dropped ones, by input position; ``added``: inserted ones, by output position.
    A pass reports every difference between its input and output here, so "no
    edits" means it returned its input list.
    """

    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.changed or self.removed or self.added)

    def __add__(self, other: Edits) -> Edits:
        if not other:
            return self
        if not self:
            return other
        return Edits(
            self.changed + other.changed,
            self.removed + other.removed,
            self.added + other.added,
        )


NO_EDITS = Edits()


def pass_event(
    kind: EventKind, edits: Edits, tokens_before: int, tokens_after: int, budget: int
) -> GuardEvent:
    """The event for one pass of ``prepare``, from the edits it reported."""
    return GuardEvent(
        kind,
        changed=edits.changed,
        removed=edits.removed,
        added=edits.added,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        budget=budget,
        detail=_detail(kind, len(edits.removed), len(edits.added), len(edits.changed)),
    )


def diff_event(
    kind: EventKind,
    before: list[BaseMessage],
    after: list[BaseMessage],
    measure: Callable[[list[BaseMessage]], int],
    budget: int,
) -> GuardEvent:
    """The event for one pass: which messages it changed, removed and added.

    A message is "changed" when a new object took the place of an old one with the
    same id (or, without ids, at the same position with the same type).
    """
    in_after = {id(m) for m in after}
    in_before = {id(m) for m in before}
    gone = {i: m for i, m in enumerate(before) if id(m) not in in_after}
    new = {i: m for i, m in enumerate(after) if id(m) not in in_before}
    gone_ids = {m.id: i for i, m in gone.items() if m.id}
    changed: list[str] = []
    for i, m in list(new.items()):
        j = gone_ids.get(m.id) if m.id else None
        if j is None and i in gone and not m.id and type(gone[i]) is type(m):
            j = i
        if j is not None and j in gone:
            changed.append(label(m, i))
            del gone[j], new[i]
    if not gone and not new and not changed:
        changed = [
            label(m, i)
            for i, m in enumerate(after)
            if i >= len(before) or before[i] is not m
        ]
    return GuardEvent(
        kind,
        changed=tuple(changed),
        removed=tuple(label(m, i) for i, m in gone.items()),
        added=tuple(label(m, i) for i, m in new.items()),
        tokens_before=measure(before),
        tokens_after=measure(after),
        budget=budget,
        detail=_detail(kind, len(gone), len(new), len(changed)),
    )


def _detail(kind: EventKind, removed: int, added: int, changed: int) -> str:
    """A short human phrase for the log line (the warning users see)."""
    verbs = {
        "truncate": f"truncated {changed} oversized message(s) to head + tail",
        "compress": f"compressed {changed} old tool result(s)",
        "strip_thinking": f"removed reasoning from {changed} older message(s)",
        "provider_compaction": f"sent from the latest compaction block ({removed} "
        "earlier message(s) the provider ignores left out)",
        "bound_thinking": "dropped signed reasoning whose prefix is no longer the "
        f"prompt that produced it from "
        f"{changed} message(s)",
        "trim": f"dropped {removed} old message(s) to fit the budget",
        "digest": f"noted the dropped turns' tool calls in their place ({added} "
        "message(s))",
        "repair": f"repaired tool pairing ({removed} dropped, {added} added, "
        f"{changed} moved or rewritten)",
        "hygiene": f"shaped for the providers ({removed} dropped or joined to the "
        f"next assistant message, {added} added, {changed} rewritten)",
    }
    return verbs.get(kind, "")


@dataclass(frozen=True)
class PrepareResult:
    """The messages to send and the report of what was done to them."""

    messages: list[BaseMessage]
    report: GuardReport
    measure: Callable[[list[BaseMessage]], ContextUsage] | None = field(
        default=None, repr=False, compare=False
    )
    """How ``usage`` counts (``ContextGuard.context_usage`` with this call's tools
    and model); nothing is counted until ``usage`` is called."""

    def usage(self, messages: Sequence[BaseMessage] | None = None) -> ContextUsage:
        """Tokens by category of the messages sent, counted when asked.

        ``messages``: measure these instead (e.g. the history given).
        """
        if self.measure is None:
            return ContextUsage(messages=len(self.messages))
        return self.measure(list(self.messages if messages is None else messages))


def step_events(
    steps: Sequence[Any], before: int, tokens: Sequence[int], budget: int
) -> list[GuardEvent]:
    """One logged event per pass that changed something (``_run.Run`` steps)."""
    events = []
    for step, after in zip(steps, tokens, strict=True):
        if step.edits:
            event = pass_event(step.kind, step.edits, before, after, budget)
            log_event(event)
            events.append(event)
        before = after
    return events
