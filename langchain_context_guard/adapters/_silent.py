"""What a guard does about a silent overflow: learn the limit, and say so.

A silent overflow is a reply whose ``usage_metadata`` reports more input tokens
than the model's window (``engine._overflow.silent_overflow``): the provider
answered a prompt it may have cut. ``note_silent_overflow`` compares with the
window as the provider counts it (no learned limit: those are in our units),
learns the limit scaled by how the provider counted what was sent
(``scaled_limit``), so the next call is pruned under it, and logs a warning.
Used where the call cannot be retried: ``ContextGuardMiddleware`` and a stream
of ``with_overflow_recovery``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import ContextGuard, OverflowInfo, scaled_limit, silent_overflow
from ._callbacks import logger

__all__ = ["note_silent_overflow"]


def note_silent_overflow(
    reply: Any, guard: ContextGuard, model: Any, sent: Callable[[], int]
) -> OverflowInfo | None:
    """Learn from and warn about a silent overflow in ``reply``; None if none.

    ``sent`` gives our count of what was sent (called only on an overflow).
    """
    window = guard.window(model, learned=False).tokens
    found = silent_overflow(reply, window)
    if found is None:
        return None
    limit = scaled_limit(found, sent())
    if limit is not None:
        ignored = guard.learn_limit(model, limit, stated=found.limit_tokens)
        limit = None if ignored is not None else limit  # logged as ignored
    logger.warning(
        "Context guard: %s (window %s); the provider may have cut the prompt; "
        "later calls are pruned under a learned limit of %s. Retry such calls "
        "with OverflowRecoveryMiddleware / with_overflow_recovery, or set "
        "context_window to the model's real window.",
        found.message,
        f"{window:,}",
        f"{limit:,}" if limit is not None else "?",
    )
    return found
