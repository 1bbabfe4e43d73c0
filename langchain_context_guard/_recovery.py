"""The overflow recovery chain (seed 004): compact, then truncate, then an error.

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

When the error states the limit ("213462 tokens > 200000 maximum"), it is learned
in ``guard.limits`` in the guard's own token units (scaled down when our counter
saw fewer tokens than the provider did), so the retry and every later ``prepare``
for that model budget for it. Every step is one ``overflow`` or
``overflow_recovery`` event, logged and handed to ``on_event``. The retry loops
live in the adapters (``recovery``, ``recovery_middleware``); a
``RecoveryState`` carried between calls bounds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn, Protocol, runtime_checkable

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    run_in_executor,
)

from ._callbacks import EVENT_EVENT
from ._errors import CompactionError, ConfigError, ContextGuardError
from ._errors import ContextOverflowError as GuardOverflowError
from ._events import GuardEvent, log_event
from ._guard import ContextGuard, _diff_event, to_messages
from ._overflow import OverflowInfo, classify_overflow
from ._window import model_name

__all__ = [
    "Recovery",
    "RecoveryChain",
    "RecoveryState",
    "SupportsCompact",
    "arecover_overflow",
    "overflow_info",
    "recover_overflow",
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

UNKNOWN_LIMIT_SHRINK = 0.75
"""Without a stated limit, the truncate step aims at this share of what was refused."""
TRUNCATE_SHARE = 0.25
"""The truncate step's cap on one tool result, as a share of the budget."""
_MIN_RATIO = 0.5


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


@dataclass(frozen=True)
class _Failure:
    messages: list[BaseMessage]
    info: OverflowInfo
    tokens: int
    window: int
    limit: int | None
    tools: Sequence[Any] | None


def overflow_info(error: BaseException) -> OverflowInfo | None:
    """``classify_overflow``, except that the library's own errors never count."""
    if isinstance(error, ContextGuardError):
        return None
    return classify_overflow(error)


def recover_overflow(
    messages: Sequence[Any],
    info: OverflowInfo,
    guard: ContextGuard,
    *,
    state: RecoveryState | None = None,
    compactor: CompactFn | None = None,
    model: Any = None,
    tools: Sequence[Any] | None = None,
    max_attempts: int = 3,
    on_event: EventSink | None = None,
) -> Recovery:
    """The next attempt's messages after ``messages`` overflowed.

    Args:
        messages: What was sent and refused (system message included).
        info: The classified provider error.
        guard: Whose counter, policy and ``limits`` apply.
        state: Returned by the previous step of this call; None on the first.
        compactor: Rewrites a history smaller; None skips compaction.
        model: The chat model (or its name) whose limit is learned.
        tools: Tool schemas sent with the messages.
        max_attempts: Most compaction attempts.
        on_event: Receives each event (they are also logged).

    Raises:
        ContextOverflowError: No step can shrink the history any further.
    """
    state = state or RecoveryState()
    failure = _begin(messages, info, guard, state, model, tools, on_event)
    if compactor is not None and _should_compact(state, max_attempts):
        try:
            compacted: Any = compactor(failure.messages)
        except CompactionError as exc:
            compacted = exc
        done = _after_compaction(failure, compacted, guard, state, on_event)
        if done is not None:
            return done
        state = replace(state, can_compact=False)
    return _truncate(failure, guard, state, on_event)


async def arecover_overflow(
    messages: Sequence[Any],
    info: OverflowInfo,
    guard: ContextGuard,
    *,
    state: RecoveryState | None = None,
    compactor: CompactFn | None = None,
    acompactor: AsyncCompactFn | None = None,
    model: Any = None,
    tools: Sequence[Any] | None = None,
    max_attempts: int = 3,
    on_event: EventSink | None = None,
) -> Recovery:
    """Async ``recover_overflow``: awaits ``acompactor``, else runs ``compactor``."""
    state = state or RecoveryState()
    failure = await run_in_executor(
        None, _begin, messages, info, guard, state, model, tools, on_event
    )
    compact = acompactor or (_in_executor(compactor) if compactor else None)
    if compact is not None and _should_compact(state, max_attempts):
        try:
            compacted: Any = await compact(failure.messages)
        except CompactionError as exc:
            compacted = exc
        done = await run_in_executor(
            None, _after_compaction, failure, compacted, guard, state, on_event
        )
        if done is not None:
            return done
        state = replace(state, can_compact=False)
    return await run_in_executor(None, _truncate, failure, guard, state, on_event)


def _in_executor(compactor: CompactFn) -> AsyncCompactFn:
    async def run(messages: list[BaseMessage]) -> Any:
        return await run_in_executor(None, compactor, messages)

    return run


def _should_compact(state: RecoveryState, max_attempts: int) -> bool:
    return (
        state.can_compact and not state.truncated and state.compactions < max_attempts
    )


def _begin(
    messages: Sequence[Any],
    info: OverflowInfo,
    guard: ContextGuard,
    state: RecoveryState,
    model: Any,
    tools: Sequence[Any] | None,
    sink: EventSink | None,
) -> _Failure:
    msgs = to_messages(messages)
    tokens = guard.count_tokens(msgs, tools=tools)
    limit = _effective_limit(info, tokens)
    key = guard.policy.model or model_name(model if model is not None else guard.model)
    if limit is not None and key:
        guard.limits.learn(key, limit)
    stated = f"{info.limit_tokens:,}" if info.limit_tokens else "not stated"
    detail = (
        f"{info.provider_hint or 'provider'} refused "
        f"{info.requested_tokens or tokens:,} tokens (limit {stated}); "
        f"attempt {state.attempts + 1}"
    )
    failure = _Failure(msgs, info, tokens, 0, limit, tools)
    try:
        window = guard.window(model).tokens
    except ContextGuardError as exc:
        _emit(sink, GuardEvent("overflow", tokens_before=tokens, detail=detail))
        _give_up(failure, guard, state, sink, _reason(exc), exc)
    window = min(window, limit) if limit else window
    budget = guard.policy.budget(window)
    _emit(
        sink,
        GuardEvent(
            "overflow",
            tokens_before=tokens,
            tokens_after=tokens,
            budget=budget,
            detail=detail,
        ),
    )
    return replace(failure, window=window)


def _effective_limit(info: OverflowInfo, tokens: int) -> int | None:
    """The stated limit in our units: scaled when the provider counted more."""
    limit, requested = info.limit_tokens, info.requested_tokens
    if limit is None:
        return None
    if not requested or requested <= tokens:
        return limit
    return int(limit * max(tokens / requested, _MIN_RATIO))


def _after_compaction(
    failure: _Failure,
    compacted: Any,
    guard: ContextGuard,
    state: RecoveryState,
    sink: EventSink | None,
) -> Recovery | None:
    step = f"compact {state.compactions + 1}"
    if isinstance(compacted, CompactionError):
        _emit(sink, _note(failure, f"{step} failed ({compacted.reason})"))
        return None
    compacted = to_messages(getattr(compacted, "messages", compacted))
    if guard.count_tokens(compacted, tools=failure.tools) >= failure.tokens:
        _emit(sink, _note(failure, f"{step} did not shrink the history"))
        return None
    share = guard.policy.max_tool_result_share
    try:
        fitted = _fit(guard, compacted, failure, failure.window, share)
    except ContextGuardError as exc:
        _emit(sink, _note(failure, f"{step}: result does not fit ({_reason(exc)})"))
        return None
    return _step(failure, fitted, guard, state, "compact", step, sink)


def _truncate(
    failure: _Failure, guard: ContextGuard, state: RecoveryState, sink: EventSink | None
) -> Recovery:
    if state.truncated:
        _give_up(failure, guard, state, sink, "every step has been tried")
    policy = guard.policy
    budget = policy.budget(failure.window)
    if failure.limit is None:
        budget = min(budget, int(failure.tokens * UNKNOWN_LIMIT_SHRINK))
    if budget <= 0:
        _give_up(failure, guard, state, sink, "the limit leaves no room after reserve")
    share = min(policy.max_tool_result_share, TRUNCATE_SHARE)
    try:
        fitted = _fit(
            guard, failure.messages, failure, budget + policy.reserve_tokens, share
        )
    except ContextGuardError as exc:
        _give_up(failure, guard, state, sink, _reason(exc), exc)
    done = _step(failure, fitted, guard, state, "truncate", "truncate", sink)
    if done is None:
        _give_up(failure, guard, state, sink, "nothing left to truncate or trim")
    return done


def _fit(
    guard: ContextGuard,
    messages: Any,
    failure: _Failure,
    window: int,
    share: float,
) -> list[BaseMessage]:
    """``prepare`` with the guard's policy fitted to ``window`` tokens."""
    policy = guard.policy.model_copy(
        update={
            "enabled": True,
            "context_window": window,
            "hard_min_tokens": 0,
            "warn_below_tokens": 0,
            "max_tool_result_share": share,
        }
    )
    tight = ContextGuard(policy, token_counter=guard.counter)
    return tight.prepare(messages, tools=failure.tools).messages


def _step(
    failure: _Failure,
    fitted: list[BaseMessage],
    guard: ContextGuard,
    state: RecoveryState,
    kind: Step,
    label: str,
    sink: EventSink | None,
) -> Recovery | None:
    """A ``Recovery`` for ``fitted``, or None if it is not smaller."""
    after = guard.count_tokens(fitted, tools=failure.tools)
    if after >= failure.tokens:
        _emit(sink, _note(failure, f"{label} did not shrink the history"))
        return None
    event = _diff_event(
        "overflow_recovery",
        failure.messages,
        fitted,
        lambda m: guard.count_tokens(m, tools=failure.tools),
        guard.policy.budget(failure.window),
    )
    event = replace(event, detail=f"{label}: retrying with {after:,} tokens")
    _emit(sink, event)
    compacted = kind == "compact"
    new = replace(
        state,
        attempts=state.attempts + 1,
        compactions=state.compactions + compacted,
        truncated=state.truncated or not compacted,
    )
    return Recovery(fitted, new, kind, (event,))


def _note(failure: _Failure, detail: str) -> GuardEvent:
    return GuardEvent("overflow_recovery", tokens_before=failure.tokens, detail=detail)


def _give_up(
    failure: _Failure,
    guard: ContextGuard,
    state: RecoveryState,
    sink: EventSink | None,
    reason: str,
    cause: BaseException | None = None,
) -> NoReturn:
    _emit(sink, _note(failure, f"stopped: {reason}"))
    info = failure.info
    tokens = info.requested_tokens or failure.tokens
    limit = info.limit_tokens or failure.limit
    shown = f"{limit:,}" if limit else "not stated"
    error = GuardOverflowError(
        f"The model refused the context ({tokens:,} tokens, limit {shown}) and "
        f"recovery stopped after {state.attempts} attempt(s): {reason}.",
        tokens=tokens,
        limit=limit,
        attempts=state.attempts,
    )
    if cause is not None:
        raise error from cause
    raise error


def _reason(error: ContextGuardError) -> str:
    """The error's message without its own "Fix:" hint."""
    return str(error).split(" Fix: ")[0].rstrip(".")


def _emit(sink: EventSink | None, event: GuardEvent) -> None:
    log_event(event)
    if sink is not None:
        sink(event)


def forward_events(events: Sequence[GuardEvent], config: RunnableConfig) -> None:
    """Dispatch events as ``context_guard.event`` custom events inside a run."""
    if events and get_callback_manager_for_config(config).parent_run_id is not None:
        for event in events:
            dispatch_custom_event(EVENT_EVENT, _payload(event), config=config)


async def aforward_events(events: Sequence[GuardEvent], config: RunnableConfig) -> None:
    """Async ``forward_events``."""
    manager = get_async_callback_manager_for_config(config)
    if events and manager.parent_run_id is not None:
        for event in events:
            await adispatch_custom_event(EVENT_EVENT, _payload(event), config=config)


def _payload(event: GuardEvent) -> dict[str, Any]:
    return {"source": "recovery", **event.to_dict()}


@dataclass(frozen=True)
class RecoveryChain:
    """What both adapters share: the chain's settings and one step of it."""

    guard: ContextGuard
    compactor: CompactFn | None = None
    acompactor: AsyncCompactFn | None = None
    max_attempts: int = 3
    on_event: EventSink | None = None

    @classmethod
    def build(
        cls,
        guard: ContextGuard,
        compactor: CompactFn | SupportsCompact | None,
        acompactor: AsyncCompactFn | None,
        max_attempts: int,
        on_event: EventSink | None,
    ) -> RecoveryChain:
        """Validate the settings; a ``compaction.Compactor`` gives both functions."""
        if max_attempts < 0:
            raise ConfigError(
                f"max_attempts must be 0 or more, got {max_attempts}.",
                field="max_attempts",
                hint="pass max_attempts=3 (the default) or 0 to skip compaction.",
            )
        if isinstance(compactor, SupportsCompact):
            acompactor = acompactor or compactor.acompact
            compactor = compactor.compact
        return cls(guard, compactor, acompactor, max_attempts, on_event)

    def step(
        self,
        messages: list[BaseMessage],
        info: OverflowInfo,
        state: RecoveryState,
        *,
        model: Any,
        tools: Sequence[Any] | None,
        config: RunnableConfig,
    ) -> Recovery:
        """``recover_overflow`` with events forwarded to the run."""
        if self.compactor is None and self.acompactor is not None:
            raise ConfigError(
                "Only an async compactor was given, but the model ran synchronously.",
                field="compactor",
                hint="pass compactor= as well, or call ainvoke/astream.",
            )
        events: list[GuardEvent] = []
        try:
            return recover_overflow(
                messages,
                info,
                self.guard,
                state=state,
                compactor=self.compactor,
                model=model,
                tools=tools,
                max_attempts=self.max_attempts,
                on_event=self._sink(events),
            )
        finally:
            forward_events(events, config)

    async def astep(
        self,
        messages: list[BaseMessage],
        info: OverflowInfo,
        state: RecoveryState,
        *,
        model: Any,
        tools: Sequence[Any] | None,
        config: RunnableConfig,
    ) -> Recovery:
        """Async ``step``."""
        events: list[GuardEvent] = []
        try:
            return await arecover_overflow(
                messages,
                info,
                self.guard,
                state=state,
                compactor=self.compactor,
                acompactor=self.acompactor,
                model=model,
                tools=tools,
                max_attempts=self.max_attempts,
                on_event=self._sink(events),
            )
        finally:
            await aforward_events(events, config)

    def _sink(self, events: list[GuardEvent]) -> EventSink:
        def sink(event: GuardEvent) -> None:
            events.append(event)
            if self.on_event is not None:
                self.on_event(event)

        return sink
