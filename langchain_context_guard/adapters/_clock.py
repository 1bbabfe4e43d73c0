"""The one clock the adapters read: when a call is sent (``prepare(now=...)``)."""

from __future__ import annotations

import time

from ..engine import ContextGuard


def call_time(guard: ContextGuard) -> float | None:
    """Now, in seconds, when the guard times its pruning to the provider's cache.

    None otherwise, so a guard without ``cache_ttl_seconds`` reads no clock.
    """
    return time.time() if guard.policy.cache_ttl_seconds is not None else None
