"""``CompactionMiddleware``: LLM compaction for LangChain v1 ``create_agent``.

``before_model`` rewrites the state with ``[system..., summary, kept tail]`` when
the trigger is reached; when compaction fails, times out or is paused, state stays
as it was and ``wrap_model_call`` fits that one call with the deterministic passes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.internal_call_transformer import (
        InternalCallTransformer,
    )
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "CompactionMiddleware needs the `langchain` package (create_agent). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from ..adapters._middleware import RequestInputs
from ..engine._guard import ContextGuard
from ._compactor import CompactionSettings, Compactor, make_recall_tool


class CompactionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Summarise old history before a model call, safely (see ``Compactor``).

    Args:
        summarizer: Any LangChain chat model (or runnable/callable returning text)
            that writes the summary.
        settings: Trigger, keep, timeout and retries; defaults to
            ``CompactionSettings()``.
        guard: Counts tokens, resolves the window and provides the fallback
            passes; defaults to ``ContextGuard()``.
        store: Archive for removed messages; defaults to the agent's store.
        fallback: Fit an over-budget call with ``guard.prepare`` (without
            touching state), e.g. after a failed compaction.
        recall: Also give the agent a ``recall`` tool over the archive.
    """

    transformers = (InternalCallTransformer,)

    def __init__(
        self,
        summarizer: Any,
        settings: CompactionSettings | None = None,
        *,
        guard: ContextGuard | None = None,
        store: BaseStore | None = None,
        fallback: bool = True,
        recall: bool = False,
    ) -> None:
        super().__init__()
        self.compactor = Compactor(summarizer, settings, guard=guard, store=store)
        self.fallback = fallback
        self.tools = [make_recall_tool(store)] if recall else []
        self._request = RequestInputs()

    def _args(self, runtime: Runtime[Any]) -> dict[str, Any]:
        info = runtime.execution_info
        return {
            "thread_id": info.thread_id if info is not None else None,
            "store": self.compactor.store or runtime.store,
            "writer": runtime.stream_writer,
        }

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Compact the state when due; ``None`` leaves it as it is."""
        return self.compactor.update(list(state["messages"]), **self._args(runtime))

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model``."""
        messages = list(state["messages"])
        return await self.compactor.aupdate(messages, **self._args(runtime))

    def _fit(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request within budget, counted as ``ContextGuardMiddleware`` counts.

        The system message, the messages and every tool sent (structured output
        included) count against the budget.
        """
        guard = self.compactor.guard
        messages = RequestInputs.messages(request)
        tools = self._request.tools(request)
        budget = guard.policy.budget(guard.window(request.model).tokens)
        if not self.fallback or guard.count_tokens(messages, tools=tools) <= budget:
            return request
        fitted = guard.prepare(messages, tools=tools, model=request.model)
        return RequestInputs.apply(request, fitted.messages)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Fit an over-budget call with the deterministic passes."""
        return handler(self._fit(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async ``wrap_model_call``."""
        return await handler(self._fit(request))
