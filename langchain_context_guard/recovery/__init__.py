"""Overflow recovery: compact, then truncate, then a clear error.

A guarded history can still be refused as too long: the provider's tokenizer
differs from ours, the tool schemas grew, or the window was guessed. Each refusal
is turned into the messages of the next attempt, in this order:

1. ``compact``: the injected compactor rewrites the history (at most
   ``max_attempts`` times, and only while it keeps shrinking it): a summary keeps
   more of the conversation than dropping turns does;
2. ``truncate``: tool results are cut to a tighter share and the history is fitted
   to the learned limit (or, when the provider gave no figure, to 3/4 of what it
   refused), once;
3. ``ContextOverflowError`` with the figures and what to do.

A reply whose ``usage_metadata`` reports more input than the model's window (a
silent overflow: the provider answered a prompt it may have cut) goes down the
same chain (``silent_info``); the reply is dropped and the call retried, or kept
when nothing is left to cut.

When the error states the limit ("213462 tokens > 200000 maximum"), it is learned
in ``guard.limits`` in the guard's own token units (scaled down when our counter
saw fewer tokens than the provider did), so the retry and every later ``prepare``
for that model budget for it. A stated limit is trusted below ``hard_min_tokens``
(that minimum guards guessed windows); an implausible one (under 1,024 tokens, or
under 1/8 of the ``context_window`` set) is ignored with a ``limit_ignored`` event.
Every step is one ``overflow`` or ``overflow_recovery`` event, logged and handed
to ``on_event``. The retry loops live in ``_runnable`` (LCEL) and ``_middleware``
(``create_agent``); a ``RecoveryState`` carried between calls bounds them.

The pieces: the values and callable shapes in ``_state``, the steps in
``_steps``, the entry points and ``RecoveryChain`` in ``_chain``. Imports the
engine and ``adapters``; ``OverflowRecoveryMiddleware`` needs the ``agents`` extra
and loads on first use.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._chain import (
    RecoveryChain,
    aforward_events,
    arecover_overflow,
    forward_events,
    overflow_info,
    recover_overflow,
    silent_info,
)
from ._runnable import OverflowRecoveryRunnable, with_overflow_recovery
from ._state import (
    AsyncCompactFn,
    CompactFn,
    EventSink,
    Recovery,
    RecoveryState,
    Step,
    SupportsCompact,
)
from ._steps import TRUNCATE_SHARE, UNKNOWN_LIMIT_SHRINK

if TYPE_CHECKING:
    from ._middleware import OverflowRecoveryMiddleware

__getattr__ = lazy_getattr(__name__, {"OverflowRecoveryMiddleware": "._middleware"})

__all__ = [
    "TRUNCATE_SHARE",
    "UNKNOWN_LIMIT_SHRINK",
    "AsyncCompactFn",
    "CompactFn",
    "EventSink",
    "OverflowRecoveryMiddleware",
    "OverflowRecoveryRunnable",
    "Recovery",
    "RecoveryChain",
    "RecoveryState",
    "Step",
    "SupportsCompact",
    "aforward_events",
    "arecover_overflow",
    "forward_events",
    "overflow_info",
    "recover_overflow",
    "silent_info",
    "with_overflow_recovery",
]
