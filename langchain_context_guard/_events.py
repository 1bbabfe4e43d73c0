"""Events and the report that ``ContextGuard.prepare`` returns."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Literal

logger = logging.getLogger("langchain_context_guard")

EventKind = Literal[
    "sanitize",
    "truncate",
    "compress",
    "strip_thinking",
    "trim",
    "repair",
    "hygiene",
    "window_warning",
    "compaction",
    "compaction_failed",
    "overflow",
    "overflow_recovery",
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

    def describe(self) -> str:
        """One log line for this event."""
        parts = [f"Context guard: {self.kind}"]
        for label, ids in (
            ("changed", self.changed),
            ("removed", self.removed),
            ("added", self.added),
        ):
            if ids:
                parts.append(f"{label} {len(ids)} message(s)")
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

    @property
    def changed(self) -> bool:
        """Whether any pass changed the history."""
        return any(e.changed or e.removed or e.added for e in self.events)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of this report."""
        return {
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "budget": self.budget,
            "context_window": self.context_window,
            "window_source": self.window_source,
            "counter": self.counter,
            "events": [e.to_dict() for e in self.events],
        }


def log_event(event: GuardEvent) -> None:
    """Log an event: data-losing changes at WARNING, the rest at INFO."""
    lossy = event.kind in {"truncate", "trim", "compaction_failed", "overflow"}
    logger.log(logging.WARNING if lossy else logging.INFO, event.describe())
