"""How deep a pruning cuts: the share of the budget it keeps, from a cost model.

Each pruning re-sends the kept prompt at full price; between prunings the prompt
grows by appending, billed at the cache rate. A shallow cut keeps more context but
prunes more often; ``prune_share`` picks the share where one more kept token would
bill as much as an uncached one (``GuardPolicy.prune_to`` says the figures).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import attrgetter

from langchain_core.messages import BaseMessage

_type = attrgetter("type")
MIN_PRUNE_SHARE = 0.3
"""The shallowest share ``prune_share`` prunes to, however fast a history grows."""
_CACHE_RATE = 0.1
"""Share of the list price a cached prompt prefix bills (the cost model's c)."""


def prune_share(
    most: float, body: int, history: Sequence[BaseMessage] | int, budget: int
) -> float:
    """Share of the budget a pruning keeps: the cost model, at most ``most``.

    A history growing ``g`` tokens a model call, pruned from budget ``B`` to
    ``pB``, bills a kept token of context at ``2g/((1-p)^2 B) + c`` (c: the cache
    rate); that reaches the price of an uncached token at
    ``p = 1 - sqrt(2g / ((1-c) B))`` (``GuardPolicy.prune_to``). ``g`` is the
    history's own average: its tokens as written over its assistant messages
    (``history``: the history, or how many assistant messages it holds, as a
    guard carries it from call to call). Fast-growing histories (huge tool
    results) thus prune deeper, down to ``MIN_PRUNE_SHARE``.
    """
    g = growth(body, history)
    if g is None or budget <= 0:
        return most
    share = 1 - math.sqrt(2 * g / ((1 - _CACHE_RATE) * budget))
    return max(min(share, most), min(MIN_PRUNE_SHARE, most))


def growth(body: int, history: Sequence[BaseMessage] | int) -> float | None:
    """Tokens a history grows by per model call (None without any call).

    ``body`` over its assistant messages: also the size of an average turn.
    ``history``: the history, or its ``assistant_count``.
    """
    calls = history if isinstance(history, int) else assistant_count(history)
    return body / calls if calls else None


def assistant_count(history: Sequence[BaseMessage]) -> int:
    """How many assistant messages ``history`` holds (C speed at 50,000 messages).

    A guard counts a whole history once, then only the new messages of each
    call (``_pipeline.Known``).
    """
    return list(map(_type, history)).count("ai")
