"""When compaction runs: the trigger and keep sizes, and when it pauses.

After a summary, compaction waits until the history (as the guard sends it) has
grown by ``keep`` tokens; after ``max_consecutive`` failures in a row (remembered
per thread by ``FailureMemory``) it waits for that growth too, longer after each
further failure, so a summarizer that cannot help is not called on every step.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from cachetools import LRUCache

ContextSize = (
    tuple[Literal["tokens"], int]
    | tuple[Literal["fraction"], float]
    | tuple[Literal["messages"], int]
)
TriggerClause = dict[Literal["tokens", "fraction", "messages"], float]
"""LangChain's dict form: every size in one clause must be reached (AND)."""
Trigger = (
    ContextSize | TriggerClause | list[ContextSize | TriggerClause] | Literal["auto"]
) | None
"""When to compact. A list triggers when any item is reached (OR); ``"auto"`` is
the lower of 0.8 of the window and the budget; ``None`` never triggers (as in
LangChain's ``SummarizationMiddleware``)."""


@dataclass(frozen=True)
class Limits:
    """The trigger and keep sizes resolved against one context window."""

    trigger_tokens: int | None
    keep_tokens: int | None
    keep_messages: int | None
    budget: int
    clauses: tuple[tuple[tuple[str, int], ...], ...] = ()
    """Each clause as ``(kind, size)`` pairs, tokens resolved; all must be met."""

    @property
    def growth(self) -> int:
        """Tokens the history must grow by to end a pause."""
        return self.keep_tokens or self.budget // 4

    def reached(self, tokens: int, messages: int) -> bool:
        """Whether any clause has all its sizes reached."""
        have = {"tokens": tokens, "messages": messages}
        return any(
            all(have[kind] >= size for kind, size in clause) for clause in self.clauses
        )


def clauses(trigger: Trigger) -> list[dict[str, float]]:
    """The trigger as a list of AND clauses (``{kind: size}``), any of which fires."""
    if trigger is None or trigger == "auto":
        return []
    items = trigger if isinstance(trigger, list) else [trigger]
    out: list[dict[str, float]] = []
    for item in items:
        pairs = item.items() if isinstance(item, dict) else [item]
        out.append({str(kind): size for kind, size in pairs})
    return out


def check_size_types(value: Any) -> None:
    """Refuse sizes LangChain refuses: booleans, strings, fractional counts.

    Runs before pydantic, whose lax mode would turn ``"10"`` into 10 and ``True``
    into a trigger at one message.
    """
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, dict):
            pairs, form = list(item.items()), "{{{!r}: {}}}"
        elif isinstance(item, tuple | list) and len(item) == 2:
            pairs, form = [(item[0], item[1])], "({!r}, {})"
        else:
            continue  # pydantic names the wrong shape
        for kind, size in pairs:
            whole = kind in ("tokens", "messages")
            if isinstance(size, bool) or not isinstance(size, int | float):
                fix = form.format(kind, 10 if whole else 0.8)
                raise ValueError(
                    f"{kind!r} must be a number, got {size!r}; write {fix}"
                )
            if whole and not isinstance(size, int):
                fix = form.format(kind, int(size))
                raise ValueError(
                    f"{kind!r} must be a whole number, got {size!r}; write {fix}"
                )


def resolve_limits(
    trigger: Trigger, keep: ContextSize, *, window: int, budget: int
) -> Limits:
    """Token sizes for ``window``; keep is capped at half the token trigger."""
    resolved = tuple(
        tuple(
            (
                "messages" if kind == "messages" else "tokens",
                int(size * window) if kind == "fraction" else int(size),
            )
            for kind, size in clause.items()
        )
        for clause in clauses(trigger)
    )
    if trigger == "auto":
        resolved = ((("tokens", min(int(0.8 * window), budget)),),)
    token_triggers = [
        n for clause in resolved for kind, n in clause if kind == "tokens"
    ]
    trigger_tokens = min(token_triggers) if token_triggers else None
    kind, size = keep
    cap = (trigger_tokens or budget) // 2
    keep_tokens = None
    if kind != "messages":
        keep_tokens = min(int(size * window) if kind == "fraction" else int(size), cap)
    keep_messages = int(size) if kind == "messages" else None
    return Limits(trigger_tokens, keep_tokens, keep_messages, budget, resolved)


def next_streak(prev: Mapping[str, Any] | None, *, before: int, growth: int) -> int:
    """The streak a new summary records, from the previous summary's marker."""
    grew = before - int(prev.get("tokens_after", 0)) if prev else growth
    return (
        int(prev.get("streak", 1)) + 1
        if prev and prev.get("over") and grew < growth
        else 1
    )


def pause_reason(
    prev: Mapping[str, Any] | None,
    *,
    tokens: int,
    growth: int,
    cap: int,
    failures: tuple[int, int],
) -> tuple[str, int]:
    """Why compaction pauses now ("" if it does not) and the growth that ends it.

    ``prev`` is the marker of the newest summary, ``tokens`` the history as the
    guard sends it, ``failures`` what ``FailureMemory.get`` returned for the
    thread. A summary waits until the history has grown by ``growth`` since the
    last one: each summary re-reads the history and loses detail, so two in a row
    would pay twice for what the deterministic passes handle anyway.
    """
    if prev:
        since = int(prev.get("sent_after", prev.get("tokens_after", 0)))
        if tokens - since < growth:
            return (
                f"the last summary was made {max(tokens - since, 0):,} tokens ago",
                growth,
            )
    failed, at = failures
    if failed >= cap:
        growth *= failed - cap + 1  # back off further after each failure
        if tokens - at < growth:
            return f"the last {failed} compactions failed", growth
    return "", growth


class FailureMemory:
    """Failed compactions in a row per thread, and the tokens at the last one."""

    def __init__(self, maxsize: int = 4_096) -> None:
        self._lock = threading.Lock()
        # Bounded: a long-lived agent serves an unbounded number of threads.
        self._failures: LRUCache[str, tuple[int, int]] = LRUCache(maxsize)

    def get(self, thread_id: str | None) -> tuple[int, int]:
        """``(failures in a row, tokens at the last)`` for a thread."""
        with self._lock:
            return self._failures.get(thread_id or "", (0, 0))

    def record(self, thread_id: str | None, tokens: int) -> None:
        """Count one more failure at ``tokens``."""
        with self._lock:
            count = self._failures.get(thread_id or "", (0, 0))[0]
            self._failures[thread_id or ""] = (count + 1, tokens)

    def clear(self, thread_id: str | None) -> None:
        """Forget a thread's failures (after a successful compaction)."""
        with self._lock:
            self._failures.pop(thread_id or "", None)
