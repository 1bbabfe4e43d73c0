"""``CacheClock``: when each conversation was last sent, to tell a cold cache.

A provider keeps a prompt cache for minutes to an hour (``cache_ttl_seconds``).
Once longer than that has passed since a conversation's last call, the next
call pays for its whole prompt whatever is sent, so a pruning then costs
nothing extra. The time is passed in (``prepare(now=...)``): the engine reads
no clock, and the same calls at the same times give the same prompts.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Hashable
from datetime import datetime

from cachetools import LRUCache

from ._errors import InvalidInputError

_MEMORY = 4_096
"""Conversations whose last call time a guard keeps."""


def call_seconds(now: object) -> float | None:
    """``prepare(now=...)`` as seconds: a finite number, or a ``datetime``'s timestamp.

    A naive ``datetime`` is read as local time (``datetime.timestamp``).
    """
    if now is None:
        return None
    if isinstance(now, datetime):
        return now.timestamp()
    if isinstance(now, bool) or not isinstance(now, int | float):
        raise InvalidInputError(
            f"prepare(now=...) must be seconds or a datetime, got {now!r}.",
            hint="pass time.time(), datetime.now(UTC), or leave now unset.",
        )
    if not math.isfinite(now):
        raise InvalidInputError(
            f"prepare(now=...) must be a finite number of seconds, got {now!r}.",
            hint="pass time.time(), datetime.now(UTC), or leave now unset.",
        )
    return float(now)


class CacheClock:
    """The last call time per conversation, against a cache lifetime."""

    def __init__(self, ttl: float | None) -> None:
        self.ttl = ttl
        self._at: LRUCache[Hashable, float] = LRUCache(_MEMORY)
        self._lock = threading.Lock()

    def tick(self, conversation: Hashable, now: float | None) -> bool:
        """Whether the cache went cold since ``conversation``'s last call.

        Records ``now`` as its last call. False without a lifetime, without a
        time, or for a conversation not seen with a time before.
        """
        if self.ttl is None or now is None:
            return False
        with self._lock:
            last = self._at.get(conversation)
            self._at[conversation] = now
        return last is not None and now - last > self.ttl

    def last(self, conversation: Hashable) -> float | None:
        """When ``conversation`` was last sent, if known."""
        with self._lock:
            return self._at.get(conversation)

    def heard(self, conversation: Hashable, at: float) -> None:
        """Another process sent ``conversation`` at ``at`` (a handover record)."""
        with self._lock:
            last = self._at.get(conversation)
            if last is None or at > last:
                self._at[conversation] = at
