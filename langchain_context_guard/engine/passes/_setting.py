"""What a pruning runs at besides the messages: ``Setting``, ``digest_room``.

The reference pipeline (``engine._reference``) and its incremental twin
(``engine.incremental``) both read it; it lives here, below both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from .._policy import GuardPolicy
from ..tokens._anchor import Gauge
from ._trim import Counter


@dataclass(frozen=True)
class Setting:
    """What a call's passes depend on besides the messages."""

    policy: GuardPolicy
    budget: int
    window: int
    turn_limit: int | None
    count: Counter
    gauge: Gauge
    digest: int = 0
    """Tokens set aside for the digest when trimming must cut (0: no digest)."""
    exact: bool = False
    """Cut exactly what is needed (no grid): a pruning of ``stable_prefix`` mode,
    whose prompt is then kept as it is while the history grows."""
    prime: Callable[[Sequence[BaseMessage]], None] | None = None
    """Counts many messages at once (``TiktokenCounter.prime``), if the counter can
    and a first run's rewrites are not counted yet (``incremental._first_run``)."""
    growth: float | None = None
    """A pruning's recent growth per model call (``incremental._cost_model``), if
    known."""
    hold: bool = True
    """The trim keeps the calls of ``drop_last`` tools and the question the latest
    user message answers while anything else can go (``_trim_units.held_codes``;
    False: the last try, when keeping them does not fit)."""
    produced: list[BaseMessage] | None = None
    """The prompt the history's replies were produced behind, as far as the guard
    knows (``incremental._produced``); None: the history as read."""
    ordinals: Mapping[str, int] | None = None
    """Each tool result's place in the history as read, by call id
    (``result_ordinals``): the keys that archived results' markers and digest
    name them by (``GuardPolicy.archived_results``); None: by call id."""


KEYS_ROOM = 200
"""Tokens a pruning keeps for the note of keys alone (its head and a few ranges
take about 100)."""


def digest_fallbacks(setting: Setting) -> list[int]:
    """The smaller digest rooms a pruning tries when what must stay leaves none.

    Without room for the digest the trim cuts as if there were none (0). With
    archived results the line of their keys is tried first (``KEYS_ROOM``):
    without it, what this pruning trimmed would have no pointer in the prompt.
    """
    if not setting.digest:
        return []
    if setting.policy.archived_results and setting.digest > KEYS_ROOM:
        return [KEYS_ROOM, 0]
    return [0]


def digest_room(policy: GuardPolicy, budget: int) -> int:
    """Tokens a pruning leaves for the digest (0: no digest)."""
    if not policy.digest:
        return 0
    return min(int(policy.digest_share * budget), policy.digest_max_tokens)
