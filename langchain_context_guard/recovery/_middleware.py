"""``OverflowRecoveryMiddleware``: overflow recovery for ``create_agent``.

```python
guard = ContextGuard(policy)
agent = create_agent(
    model,
    tools,
    middleware=[ContextGuardMiddleware(guard), OverflowRecoveryMiddleware(guard)],
)
```

``wrap_model_call`` (and ``awrap_model_call``) retries a model call the provider
refused as too long with ``handler(request.override(messages=...))``, going down
``recovery``'s chain: compact, truncate, then ``ContextOverflowError``. Sharing the
guard with ``ContextGuardMiddleware`` (listed first, so it runs outside) makes the
limit learned from an error apply to every later call. The agent's state is not
changed; only the retried request is.

A refusal of a signed thinking block as "bound to a different conversation"
teaches the guard that the model binds its blocks (``ContextGuard.learn_binding``:
from then on it drops stale ones, and ``ContextGuardMiddleware`` asks for
``drop_block``), and the call is retried once asking Anthropic to drop the
stale block itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised by a test
    raise ImportError(
        "OverflowRecoveryMiddleware needs LangChain v1 agents (langchain>=1.0). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables.config import ensure_config
from langgraph.errors import GraphBubbleUp

from ..adapters import RequestInputs, drop_stale_thinking_model
from ..engine import ContextOverflowError as GuardOverflowError
from ..engine import OverflowInfo, is_binding_error
from ._chain import (
    RecoveryChain,
    overflow_info,
)
from ._state import (
    AsyncCompactFn,
    CompactFn,
    EventSink,
    Recovery,
    RecoveryState,
    SupportsCompact,
)

if TYPE_CHECKING:
    from ..engine import ContextGuard

__all__ = ["OverflowRecoveryMiddleware"]

Result = ModelResponse[Any] | AIMessage


class OverflowRecoveryMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Retries a model call refused as too long with recovered messages.

    Args:
        guard: Whose counter and policy shape the retry, and which learns limits.
        model: The chat model, or its name, whose window and reserve to fit: the
            same as ``ContextGuardMiddleware(model=...)`` when that was given one;
            by default the agent's model of each call (as there).
        compactor: Tried first, at most ``max_attempts`` times: ``(messages) ->
            messages`` or a ``compaction.Compactor``; None goes straight to
            truncation.
        acompactor: Async compactor for ``awrap_model_call``.
        max_attempts: Most compaction attempts per model call.
        on_event: Receives each ``overflow``/``overflow_recovery`` event.
        retry_silent_overflow: Also retry a call whose reply reports more input
            tokens than the window (the provider answered a prompt it may have
            cut): the reply is dropped and the call retried as for a refusal;
            when nothing is left to cut, the reply is kept.
    """

    def __init__(
        self,
        guard: ContextGuard,
        *,
        model: Any = None,
        compactor: CompactFn | SupportsCompact | None = None,
        acompactor: AsyncCompactFn | None = None,
        max_attempts: int = 3,
        on_event: EventSink | None = None,
        retry_silent_overflow: bool = True,
    ) -> None:
        super().__init__()
        self.guard = guard
        self.model = model
        self.chain = RecoveryChain.build(
            guard,
            compactor,
            acompactor,
            max_attempts,
            on_event,
            retry_silent=retry_silent_overflow,
        )
        self._request = RequestInputs()

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Result:
        """Call the model; on an overflow, retry with recovered messages."""
        current, state = request, RecoveryState()
        while True:
            try:
                response = handler(current)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                rebound = self._rebound(request, current, exc)
                if rebound is not None:
                    current = rebound
                    continue
                info = overflow_info(exc)
                if info is None:
                    raise
                recovery = self._step(request, current, info, state)
            else:
                info = self.chain.silent(response, self._model(request))
                if info is None:
                    return response
                try:
                    recovery = self._step(request, current, info, state)
                except GuardOverflowError:  # nothing left to cut: keep the reply
                    return response
            current, state = _retry(request, recovery), recovery.state

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Result:
        """Async ``wrap_model_call``."""
        current, state = request, RecoveryState()
        while True:
            try:
                response = await handler(current)
            except GraphBubbleUp:
                raise
            except Exception as exc:
                rebound = self._rebound(request, current, exc)
                if rebound is not None:
                    current = rebound
                    continue
                info = overflow_info(exc)
                if info is None:
                    raise
                recovery = await self._astep(request, current, info, state)
            else:
                info = self.chain.silent(response, self._model(request))
                if info is None:
                    return response
                try:
                    recovery = await self._astep(request, current, info, state)
                except GuardOverflowError:  # nothing left to cut: keep the reply
                    return response
            current, state = _retry(request, recovery), recovery.state

    def _model(self, request: ModelRequest[Any]) -> Any:
        return self.model if self.model is not None else request.model

    def _rebound(
        self, request: ModelRequest[Any], current: ModelRequest[Any], exc: Exception
    ) -> ModelRequest[Any] | None:
        """The retry of a call refused for a stale bound block, once; else None.

        The guard learns that the model binds; the retry's model asks Anthropic
        to drop the stale block (a model that cannot ask is not retried).
        """
        if not is_binding_error(exc):
            return None
        self.guard.learn_binding(self._model(request))
        model = drop_stale_thinking_model(current.model)
        if model is current.model:
            return None  # already asking, or not a model that can
        return current.override(model=model)

    def _step(
        self,
        request: ModelRequest[Any],
        current: ModelRequest[Any],
        info: OverflowInfo,
        state: RecoveryState,
    ) -> Recovery:
        return self.chain.step(
            _inputs(current),
            info,
            state,
            model=self._model(request),
            tools=self._request.tools(request),
            config=ensure_config(),
        )

    async def _astep(
        self,
        request: ModelRequest[Any],
        current: ModelRequest[Any],
        info: OverflowInfo,
        state: RecoveryState,
    ) -> Recovery:
        return await self.chain.astep(
            _inputs(current),
            info,
            state,
            model=self._model(request),
            tools=self._request.tools(request),
            config=ensure_config(),
        )


def _inputs(request: ModelRequest[Any]) -> list[BaseMessage]:
    return RequestInputs.messages(request)


def _retry(request: ModelRequest[Any], recovery: Recovery) -> ModelRequest[Any]:
    return RequestInputs.apply(request, recovery.messages)
