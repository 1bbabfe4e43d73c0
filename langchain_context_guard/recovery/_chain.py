"""The recovery chain as the adapters run it: one step per refused model call.

``recover_overflow`` (and ``arecover_overflow``) turn one refusal into the next
attempt's messages; ``RecoveryChain`` holds the adapters' settings and forwards
each step's events to the run as ``context_guard.event`` custom events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
    run_in_executor,
)

from ..adapters import EVENT_EVENT
from ..engine import (
    CompactionError,
    ConfigError,
    ContextGuard,
    ContextGuardError,
    GuardEvent,
    OverflowInfo,
    classify_overflow,
    silent_overflow,
)
from ._state import (
    AsyncCompactFn,
    CompactFn,
    EventSink,
    Recovery,
    RecoveryState,
    SupportsCompact,
)
from ._steps import after_compaction, begin, truncate

__all__ = [
    "RecoveryChain",
    "aforward_events",
    "arecover_overflow",
    "forward_events",
    "overflow_info",
    "recover_overflow",
    "silent_info",
]


def overflow_info(error: BaseException) -> OverflowInfo | None:
    """``classify_overflow``, except that the library's own errors never count."""
    if isinstance(error, ContextGuardError):
        return None
    return classify_overflow(error)


def silent_info(response: Any, guard: ContextGuard, model: Any) -> OverflowInfo | None:
    """A silent overflow: the reply reports more input than ``model``'s window.

    ``response`` is a chat model's reply or a ``ModelResponse`` (its last
    ``AIMessage`` counts). The window is the model's, without learned limits.
    """
    messages = getattr(response, "result", None) or [response]
    replies = [m for m in messages if isinstance(m, AIMessage)]
    if not replies:
        return None
    try:
        # As the provider counts: a learned limit is in our units.
        window = guard.window(model, learned=False).tokens
    except ContextGuardError:
        return None
    return silent_overflow(replies[-1], window)


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
    failure = begin(messages, info, guard, state, model, tools, on_event)
    if compactor is not None and _should_compact(state, max_attempts):
        try:
            compacted: Any = compactor(failure.messages)
        except CompactionError as exc:
            compacted = exc
        done = after_compaction(failure, compacted, guard, state, on_event)
        if done is not None:
            return done
        state = replace(state, can_compact=False)
    return truncate(failure, guard, state, on_event)


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
        None, begin, messages, info, guard, state, model, tools, on_event
    )
    compact = acompactor or (_in_executor(compactor) if compactor else None)
    if compact is not None and _should_compact(state, max_attempts):
        try:
            compacted: Any = await compact(failure.messages)
        except CompactionError as exc:
            compacted = exc
        done = await run_in_executor(
            None, after_compaction, failure, compacted, guard, state, on_event
        )
        if done is not None:
            return done
        state = replace(state, can_compact=False)
    return await run_in_executor(None, truncate, failure, guard, state, on_event)


def _in_executor(compactor: CompactFn) -> AsyncCompactFn:
    async def run(messages: list[BaseMessage]) -> Any:
        return await run_in_executor(None, compactor, messages)

    return run


def _should_compact(state: RecoveryState, max_attempts: int) -> bool:
    return (
        state.can_compact and not state.truncated and state.compactions < max_attempts
    )


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
    retry_silent: bool = True
    """Retry a reply that reports more input than the window (silent overflow)."""

    @classmethod
    def build(
        cls,
        guard: ContextGuard,
        compactor: CompactFn | SupportsCompact | None,
        acompactor: AsyncCompactFn | None,
        max_attempts: int,
        on_event: EventSink | None,
        retry_silent: bool = True,
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
        return cls(guard, compactor, acompactor, max_attempts, on_event, retry_silent)

    def silent(self, response: Any, model: Any) -> OverflowInfo | None:
        """``silent_info`` when silent overflows are retried, else None."""
        return silent_info(response, self.guard, model) if self.retry_silent else None

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
