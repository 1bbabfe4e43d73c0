"""One call of ``ContextGuard.prepare``: the history as read, and its setting."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any, Protocol

from langchain_core.messages import BaseMessage

from ._cache_clock import CacheClock, call_seconds
from ._events import GuardEvent, GuardReport, step_events
from ._notices import Notices
from ._policy import GuardPolicy
from ._result_keys import result_ordinals
from ._window import WindowInfo
from .incremental._first_run import CallCounts, count_new
from .incremental._produced import produced_for, rewritten_record
from .incremental._read_history import update_known
from .incremental._record import CallKey
from .incremental._reuse import Limits
from .incremental._run import Run
from .incremental._stable_prefix import Sent, common_prefix, conversation
from .passes._setting import Setting, digest_room
from .tokens._anchor import Gauge, Known, Scan
from .tokens._counters import REPLY_OVERHEAD, TokenCounter


class Reader(Protocol):
    """What ``read_call`` uses of a ``ContextGuard``."""

    policy: GuardPolicy
    counter: TokenCounter
    model: Any
    _last: Known
    _notices: Notices
    _lock: Any

    @property
    def _stables(self) -> MutableMapping[tuple[Any, ...], Sent]: ...
    @property
    def _ends(self) -> MutableMapping[tuple[Any, ...], Any]: ...
    @property
    def _unknown(self) -> MutableMapping[tuple[Any, ...], bool]: ...

    _clock: CacheClock

    def window(self, model: Any = None, *, learned: bool = True) -> WindowInfo: ...

    def _read(
        self, messages: Any
    ) -> tuple[
        list[BaseMessage], Known | None, list[Any] | None, list[BaseMessage]
    ]: ...

    def _last_sent(self, original: list[BaseMessage]) -> Sent | None: ...

    def _budget(self, window: int, model: Any, source: str) -> int: ...

    def _tool_tokens(self, tools: Sequence[Any] | None) -> int: ...

    def policy_for(
        self, model: Any = None, *, replied: bool = False, persist: bool = False
    ) -> GuardPolicy: ...

    def _gauge(
        self,
        messages: list[BaseMessage],
        usage_at: int,
        usage_body: int,
        extra: int,
        model: Any = None,
    ) -> Gauge: ...

    def _name(self, model: Any) -> str: ...


@dataclass
class Call:
    """What ``read_call`` found, for the rest of the call."""

    given: Any
    """The history as the caller passed it."""
    original: list[BaseMessage]
    """That history as messages (the caller's list where it already was one)."""
    kept_in: list[BaseMessage]
    """The list the guard keeps it in (``_read_history``)."""
    known: Known | None
    """The guard's previous history, where this one grows it."""
    now: Known
    """This history's scan: our counts, where its last usage is, its size."""
    info: WindowInfo
    stable: Sent | None
    """The conversation's previous prompt (``stable_prefix``), if kept."""
    sent: Sent | None
    """The conversation's previous prompt, for the signed reasoning it bound."""
    key: CallKey
    keys: tuple[CallKey, ...]
    """Keys under which the previous prompt is re-sent: this call's, and, once a
    reply switched the policy (``interactive_tuning``), the one before it: the
    switch waits for the next pruning, and the provider's cache keeps hitting."""
    gauge: Gauge
    count: Callable[[BaseMessage], int]
    prime: Callable[[Sequence[BaseMessage]], None] | None
    counts: CallCounts | None
    """The call's own counting, closed when the call ends (``_first_run``)."""
    events: list[GuardEvent]
    cold: bool = False
    """More than ``cache_ttl_seconds`` passed since the conversation's last call."""
    unknown: bool = False
    """A record says the conversation was pruned out of sight (``_handover``)."""
    persist: bool = False
    """The output becomes the stored history (``prepare(persist=True)``)."""

    def scan(self) -> Scan:
        """The history's counts, as ``prune`` reads them."""
        now = self.now
        return Scan(
            body=now.body,
            usage_at=now.usage_at,
            usage_body=now.usage_body,
            calls=now.calls,
            replied=now.replied,
        )

    def setting(self, *, exact: bool) -> Setting:
        """What this call's passes run at (``exact``: to the cost model's depth)."""
        key = self.key
        return Setting(
            policy=key.policy,
            budget=key.budget,
            window=key.window,
            turn_limit=key.turn_limit,
            count=self.count,
            gauge=self.gauge,
            digest=digest_room(key.policy, key.budget),
            exact=exact,
            prime=self.prime,
            produced=produced_for(self.sent, self.original, self.unknown)
            if key.policy.bound_thinking
            else None,
            ordinals=self.ordinals,
        )

    @cached_property
    def ordinals(self) -> dict[str, int] | None:
        """The history's result keys, when results are archived (read once)."""
        if not self.key.policy.archived_results:
            return None
        return result_ordinals(self.original)

    def limits(self) -> Limits:
        """What a re-sent prompt must stay within (``_reuse``)."""
        key = self.key
        return Limits(
            self.gauge, key.budget, key.turn_limit, self.info, self.known, self.now
        )

    def report(self, run: Run, sent: list[BaseMessage], counter: str) -> GuardReport:
        """The report of a call whose passes ran (``run``) and gave ``sent``."""
        budget, stable = self.key.budget, self.stable
        events = self.events + step_events(run.steps, run.before, run.tokens, budget)
        return GuardReport(
            tokens_before=run.before,
            tokens_after=run.now,
            budget=budget,
            context_window=self.info.tokens,
            window_source=self.info.source,
            counter=counter,
            events=tuple(events),
            reused=common_prefix(stable.output, sent) if stable else 0,
        )


def _cold(clock: CacheClock, original: list[BaseMessage], at: float | None) -> bool:
    """``clock.tick`` for this history's conversation, when there is a time."""
    if clock.ttl is None or at is None or not original:
        return False
    return clock.tick(conversation(original), at)


def known_prompt(
    guard: Reader, original: list[BaseMessage]
) -> list[BaseMessage] | None:
    """The prompt ``original``'s replies were produced behind, as ``guard`` knows it.

    Its record of this conversation (``_produced.produced_for``); the guard is
    only read (``ContextGuard._produced_prompt``, for the reference's setting);
    ``read_call`` finds the same record.
    """
    sent = guard._last_sent(original) or rewritten_record(
        guard._stables, guard._ends, original
    )
    unknown = bool(original) and conversation(original) in guard._unknown
    return produced_for(sent, original, unknown)


def read_call(
    guard: Reader,
    messages: Any,
    tools: Sequence[Any] | None,
    model: Any,
    session_kind: str | None,
    sent_at: float | datetime | None = None,
    cold: bool = False,
    *,
    persist: bool = False,
) -> Call:
    """The history, counted where new, and what this call is pruned at.

    Keeps the history read as the guard's last (``_read_history``), and
    ``sent_at`` as its conversation's last call time (``_cache_clock``);
    ``cold``: taken as coming after the cache expired, whatever the time;
    ``persist``: the output becomes the stored history (``ContextGuard.policy_for``).
    """
    at = call_seconds(sent_at)
    original, known, rebuilt, kept_in = guard._read(messages)
    info, policy = guard.window(model), guard.policy_for(model)
    sent = guard._last_sent(original)
    stable = sent if policy.stable_prefix else None
    unknown = False
    if sent is None and policy.bound_thinking and policy.enabled:
        with guard._lock:
            sent = rewritten_record(guard._stables, guard._ends, original)
            unknown = bool(original) and conversation(original) in guard._unknown
    seen = None if known is None else known.size
    count, prime, counts = count_new(
        guard.counter, original, seen, stable is None, policy, info.tokens
    )
    now = update_known(known, original, rebuilt, kept_in, count)
    guard._last = now
    untuned = policy
    policy = guard.policy_for(model, replied=now.replied, persist=persist)
    budget = guard._budget(info.tokens, model, info.source)
    extra = guard._tool_tokens(tools) + REPLY_OVERHEAD
    key = CallKey(
        policy=policy,
        counter=guard.counter,
        budget=budget,
        window=info.tokens,
        turn_limit=policy.turn_limit(session_kind),
        extra=extra,
    )
    keys = (key,) if untuned is policy else (key, key._replace(policy=untuned))
    gauge = guard._gauge(original, now.usage_at, now.usage_body, extra, model)
    used = guard.model if model is None else model
    events = guard._notices.due(info, budget, guard._name(model), used, original, seen)
    return Call(
        given=messages,
        original=original,
        kept_in=kept_in,
        known=known,
        now=now,
        info=info,
        stable=stable,
        sent=sent,
        key=key,
        keys=keys,
        gauge=gauge,
        count=count,
        prime=prime,
        counts=counts,
        events=events,
        cold=_cold(guard._clock, original, at) or cold,
        unknown=unknown,
        persist=persist,
    )
