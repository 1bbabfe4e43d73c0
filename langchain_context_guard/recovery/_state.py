"""The recovery chain's values and the shapes of what it calls.

``RecoveryState`` is carried between the attempts of one model call and bounds
the chain; ``Recovery`` is one step's outcome. ``CompactFn``/``AsyncCompactFn``
and ``SupportsCompact`` describe an injected compactor, ``EventSink`` the
receiver of the chain's events.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from langchain_core.messages import BaseMessage

from ..engine import GuardEvent

__all__ = [
    "AsyncCompactFn",
    "CompactFn",
    "EventSink",
    "Recovery",
    "RecoveryState",
    "Step",
    "SupportsCompact",
]

CompactFn = Callable[[list[BaseMessage]], Any]
"""``(messages) -> messages`` (or a result with ``.messages``); may raise
``CompactionError``."""
AsyncCompactFn = Callable[[list[BaseMessage]], Awaitable[Any]]
EventSink = Callable[[GuardEvent], None]


@runtime_checkable
class SupportsCompact(Protocol):
    """An object that compacts, like ``compaction.Compactor``."""

    def compact(self, messages: Any) -> Any:
        """Return the compacted history (or a result with ``.messages``)."""
        ...

    async def acompact(self, messages: Any) -> Any:
        """Async ``compact``."""
        ...


Step = Literal["compact", "truncate"]


@dataclass(frozen=True)
class RecoveryState:
    """How far one model call has gone down the recovery chain."""

    attempts: int = 0
    compactions: int = 0
    can_compact: bool = True
    truncated: bool = False


@dataclass(frozen=True)
class Recovery:
    """The messages of the next attempt and where the chain now stands."""

    messages: list[BaseMessage]
    state: RecoveryState
    step: Step
    events: tuple[GuardEvent, ...]
