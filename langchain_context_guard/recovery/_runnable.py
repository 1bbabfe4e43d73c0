"""The LCEL adapter for overflow recovery: ``with_overflow_recovery(model, guard)``.

```python
model = with_overflow_recovery(chat_model.bind_tools(tools), guard)
chain = prompt | model
```

The returned runnable prepares its input with ``guard.prepare`` (so a limit learned
earlier applies), calls the model, and when the provider refuses the context as
too long retries with the messages of ``_recovery``'s chain: compact, truncate,
then ``ContextOverflowError``. Any other error (rate limit, billing, auth, ...)
propagates untouched. Events go to ``on_event``, to the log, and, inside a run,
out as ``context_guard.event`` custom events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.messages.ai import (
    InputTokenDetails,
    OutputTokenDetails,
    UsageMetadata,
)
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableSequence,
)
from langchain_core.runnables.config import ensure_config, run_in_executor

from ..adapters import aemit, emit, note_silent_overflow
from ..engine import ContextGuard, OverflowInfo
from ..engine import ContextOverflowError as GuardOverflowError
from ._chain import (
    RecoveryChain,
    arecover_overflow,
    overflow_info,
    recover_overflow,
)
from ._state import (
    AsyncCompactFn,
    CompactFn,
    EventSink,
    Recovery,
    RecoveryState,
    SupportsCompact,
)

__all__ = [
    "OverflowRecoveryRunnable",
    "Recovery",
    "RecoveryChain",
    "RecoveryState",
    "SupportsCompact",
    "arecover_overflow",
    "overflow_info",
    "recover_overflow",
    "with_overflow_recovery",
]


def _unwrap(model: Runnable[Any, Any]) -> tuple[Any, list[Any] | None]:
    """The chat model under bindings/parsers, and the tools bound to it."""
    tools: list[Any] | None = None
    current: Any = model
    for _ in range(16):
        if isinstance(current, RunnableBinding):
            bound = current.kwargs.get("tools")
            tools = tools or (list(bound) if bound else None)
            current = current.bound
        elif isinstance(current, RunnableSequence):
            current = current.first
        else:
            break
    return current, tools


def _read(value: Any) -> Any:
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    return value


class OverflowRecoveryRunnable(Runnable[LanguageModelInput, Any]):
    """A chat model that is guarded, and retried with recovered messages on overflow.

    Build it with ``with_overflow_recovery``; ``invoke``, ``ainvoke``, ``batch``,
    ``stream`` and ``astream`` work. A stream is retried only if it failed before
    its first chunk.
    """

    def __init__(self, model: Runnable[Any, Any], chain: RecoveryChain) -> None:
        self.model = model
        self.chain = chain
        self.guard = chain.guard
        self.chat_model, self.tools = _unwrap(model)
        self.name = "OverflowRecovery"

    def bind_tools(
        self, tools: Sequence[Any], **kwargs: Any
    ) -> OverflowRecoveryRunnable:
        """Bind tools to the wrapped model, keeping the recovery."""
        bound = self.model.bind_tools(tools, **kwargs)  # type: ignore[attr-defined]
        return OverflowRecoveryRunnable(bound, self.chain)

    def _prepare(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        result = self.guard.prepare(
            _read(value), tools=self.tools, model=self.chat_model
        )
        emit(result.report, source="recovery", config=config)
        return result.messages

    async def _aprepare(self, value: Any, config: RunnableConfig) -> list[BaseMessage]:
        result = await run_in_executor(
            config,
            self.guard.prepare,
            _read(value),
            tools=self.tools,
            model=self.chat_model,
        )
        await aemit(result.report, source="recovery", config=config)
        return result.messages

    def invoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Call the model on the guarded input, recovering from overflows.

        A reply reporting more input tokens than the window (a silent overflow)
        is retried like a refusal, unless ``retry_silent_overflow`` is off; when
        nothing is left to cut it is returned.
        """
        config = ensure_config(config)
        messages = self._prepare(input, config)
        state = RecoveryState()
        while True:
            try:
                reply = self.model.invoke(messages, config, **kwargs)
            except Exception as exc:
                info = overflow_info(exc)
                if info is None:
                    raise
                recovery = self._step(messages, info, state, config)
            else:
                info = self.chain.silent(reply, self.chat_model)
                if info is None:
                    return reply
                try:
                    recovery = self._step(messages, info, state, config)
                except GuardOverflowError:  # nothing left to cut: keep the reply
                    return reply
            messages, state = recovery.messages, recovery.state

    async def ainvoke(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Any:
        """Async ``invoke``."""
        config = ensure_config(config)
        messages = await self._aprepare(input, config)
        state = RecoveryState()
        while True:
            try:
                reply = await self.model.ainvoke(messages, config, **kwargs)
            except Exception as exc:
                info = overflow_info(exc)
                if info is None:
                    raise
                recovery = await self._astep(messages, info, state, config)
            else:
                info = self.chain.silent(reply, self.chat_model)
                if info is None:
                    return reply
                try:
                    recovery = await self._astep(messages, info, state, config)
                except GuardOverflowError:  # nothing left to cut: keep the reply
                    return reply
            messages, state = recovery.messages, recovery.state

    def _note(self, messages: list[BaseMessage], input_tokens: int) -> None:
        """After a stream: learn from a silent overflow (it cannot be retried)."""
        if input_tokens:
            note_silent_overflow(
                AIMessage("", usage_metadata=_usage(input_tokens)),
                self.guard,
                self.chat_model,
                lambda: self.guard.count_tokens(messages, tools=self.tools),
            )

    def _step(
        self,
        messages: list[BaseMessage],
        info: OverflowInfo,
        state: RecoveryState,
        config: RunnableConfig,
    ) -> Recovery:
        return self.chain.step(
            messages,
            info,
            state,
            model=self.chat_model,
            tools=self.tools,
            config=config,
        )

    async def _astep(
        self,
        messages: list[BaseMessage],
        info: OverflowInfo,
        state: RecoveryState,
        config: RunnableConfig,
    ) -> Recovery:
        return await self.chain.astep(
            messages,
            info,
            state,
            model=self.chat_model,
            tools=self.tools,
            config=config,
        )

    def stream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> Iterator[Any]:
        """Stream the model's output; retried only before the first chunk.

        A stream whose chunks report more input tokens than the window cannot be
        taken back: the limit is learned and a warning logged (as
        ``ContextGuardMiddleware`` does).
        """
        config = ensure_config(config)
        messages = self._prepare(input, config)
        state = RecoveryState()
        while True:
            started, seen = False, 0
            try:
                for chunk in self.model.stream(messages, config, **kwargs):
                    started, seen = True, seen + _input_tokens(chunk)
                    yield chunk
                self._note(messages, seen)
                return
            except Exception as exc:
                info = None if started else overflow_info(exc)
                if info is None:
                    raise
                recovery = self._step(messages, info, state, config)
                messages, state = recovery.messages, recovery.state

    async def astream(
        self,
        input: LanguageModelInput,
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[Any]:
        """Async ``stream``."""
        config = ensure_config(config)
        messages = await self._aprepare(input, config)
        state = RecoveryState()
        while True:
            started, seen = False, 0
            try:
                async for chunk in self.model.astream(messages, config, **kwargs):
                    started, seen = True, seen + _input_tokens(chunk)
                    yield chunk
                self._note(messages, seen)
                return
            except Exception as exc:
                info = None if started else overflow_info(exc)
                if info is None:
                    raise
                recovery = await self._astep(messages, info, state, config)
                messages, state = recovery.messages, recovery.state


def _input_tokens(chunk: Any) -> int:
    """The input tokens a streamed chunk reports (0 if none)."""
    usage = getattr(chunk, "usage_metadata", None)
    value = usage.get("input_tokens") if isinstance(usage, dict) else None
    return value if isinstance(value, int) else 0


def _usage(input_tokens: int) -> UsageMetadata:
    return UsageMetadata(
        input_tokens=input_tokens,
        output_tokens=0,
        total_tokens=0,
        input_token_details=InputTokenDetails(),
        output_token_details=OutputTokenDetails(),
    )


def with_overflow_recovery(
    model: Runnable[Any, Any],
    guard: ContextGuard,
    *,
    compactor: CompactFn | SupportsCompact | None = None,
    acompactor: AsyncCompactFn | None = None,
    max_attempts: int = 3,
    on_event: EventSink | None = None,
    retry_silent_overflow: bool = True,
) -> OverflowRecoveryRunnable:
    """Wrap a chat model for LCEL: guard its input and recover from overflows.

    Args:
        model: A chat model, possibly with tools bound (``model.bind_tools(...)``).
        guard: Prepares each input and learns the limits providers state.
        compactor: Tried first on an overflow: ``(messages) -> messages``, or a
            ``compaction.Compactor`` (its ``compact``/``acompact``).
        acompactor: Async compactor for ``ainvoke``/``astream``.
        max_attempts: Most compaction attempts per call.
        on_event: Receives each ``overflow``/``overflow_recovery`` event.
        retry_silent_overflow: Also retry (``invoke``/``ainvoke``) a reply that
            reports more input tokens than the window; a stream, already
            yielded, is not retried (its limit is learned instead).

    Returns:
        A runnable taking what the model takes and returning what it returns.
    """
    chain = RecoveryChain.build(
        guard,
        compactor,
        acompactor,
        max_attempts,
        on_event,
        retry_silent=retry_silent_overflow,
    )
    return OverflowRecoveryRunnable(model, chain)
