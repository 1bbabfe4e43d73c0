"""How deep a pruning cuts: the share of the budget it keeps, from a cost model.

Each pruning re-sends the kept prompt at full price; between prunings the prompt
grows by appending, billed at the cache rate. A shallow cut keeps more context but
prunes more often; ``prune_share`` picks the share where one more kept token would
bill as much as an uncached one (``GuardPolicy.prune_to`` says the figures), and
``cycle_cost`` weighs two cuts that whole turns leave on either side of it.

The model assumes the cache stays warm between calls. A call after it expired
(``GuardPolicy.cache_ttl_seconds``) pays full price whatever it sends, so the
pruning's re-send, the cost weighed here, is free then: the guard prunes afresh
at that call, to this same depth, since the cycles after it cost what any cycle
costs.
"""

from __future__ import annotations

import math

MIN_PRUNE_SHARE = 0.3
"""The shallowest share ``prune_share`` prunes to, however fast a history grows."""
_CACHE_RATE = 0.1
"""Share of the list price a cached prompt prefix bills (the cost model's c)."""
_VALUE = 1.0
"""Worth of one token of context sent with a call, in uncached input tokens (V)."""


def prune_share(most: float, g: float | None, budget: int) -> float:
    """Share of the budget a pruning keeps: the cost model, at most ``most``.

    A history growing ``g`` tokens a model call (``growth``), pruned from budget
    ``B`` to ``pB``, bills a kept token of context at ``2g/((1-p)^2 B) + c`` (c:
    the cache rate); that reaches the price of an uncached token at
    ``p = 1 - sqrt(2g / ((1-c) B))`` (``GuardPolicy.prune_to``). Fast-growing
    histories (huge tool results) thus prune deeper, down to ``MIN_PRUNE_SHARE``.
    """
    if g is None or budget <= 0:
        return most
    share = 1 - math.sqrt(2 * g / ((_VALUE - _CACHE_RATE) * budget))
    return max(min(share, most), min(MIN_PRUNE_SHARE, most))


def cycle_cost(kept: float, g: float, budget: int) -> float:
    """Net cost per model call of pruning to ``kept`` tokens (lower is better).

    From ``kept`` the prompt grows ``g`` a call up to ``budget``, so the pruning's
    full-price re-send of ``kept`` spreads over ``(budget - kept) / g`` calls;
    every call sends on average ``(budget + kept) / 2`` tokens of context, billed
    at the cache rate c and worth V each: ``kept g / (budget - kept) - (V - c)
    (budget + kept) / 2``. ``prune_share`` is this function's minimum; when whole
    turns leave a cut on either side of it, the lower cost is the better cut.
    """
    room = max(budget - kept, 1.0)
    return kept * g / room - (_VALUE - _CACHE_RATE) * (budget + kept) / 2


def growth(body: int, calls: int) -> float | None:
    """Tokens a history grows by per model call (None without any call).

    ``body``, the history's tokens as the prompt holds them (through the
    truncation pass: a 50,000-token tool result grows the prompt by its head
    and tail only), over its assistant messages. Of the estimates tried, this
    one predicts the growth of the coming cycle best: on the shared transcripts,
    at the calls where a pruning happens, its median ``|log(estimate / actual)|``
    is 0.40 at 16k and 0.11 at 32k, against 0.54 / 0.18 for the history as
    written and 0.45 / 0.25 for the newest stretch of ``(1 - prune_to)`` of the
    budget (``benchmarks/growth_estimates.py``). ``calls``: its assistant
    messages (``assistant_count``, carried from call to call in ``Known``).
    """
    return body / calls if calls else None
