"""Promoting what a pruning keeps, so warm calls do not traverse it.

A call that runs the passes over a long history (the first call, or a pruning
in ``stable_prefix`` mode) leaves behind the structures the next calls reuse:
the record of every pass (lists of the whole history), per-message costs and
kinds, counts. They are new objects, so CPython's garbage collector holds them
in its youngest generation, and its next young pass, which an allocation in a
later warm call sets off, traverses every one of them: at 50,000 messages 6-17
ms landing on a call that otherwise takes about 1 ms (docs/design/warm-calls.md), then
again when the middle generation is collected.

``settle`` collects the two younger generations at the end of such a call, in
the call that made the objects: the same traversal, paid once and where the
work was done, and the objects then sit in the oldest generation, which is
collected rarely. It is only a collection (no ``gc.disable``/``gc.freeze``, no
threshold changed): it frees nothing that is still used and runs no code a
collection at any allocation would not run. Short histories skip it (their
young pass is cheap), as do calls in the mode that runs the passes on every
call (``stable_prefix=False``): there a collection per call would cost more
than it saves and push the caller's young objects into the old generation.
"""

from __future__ import annotations

import gc

SETTLE_FROM = 512
"""Histories at least this long are settled after a call that ran the passes.

From about this length the young pass such a call sets off costs about what a
whole warm call does (0.5-1 ms at 1,000 messages; 6-17 ms at 50,000)."""


def settle(messages: int) -> None:
    """Collect the young generations after the passes ran on ``messages`` messages."""
    if messages >= SETTLE_FROM and gc.isenabled():
        gc.collect(1)
