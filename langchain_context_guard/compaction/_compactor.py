"""LLM compaction: summarise old messages, keep the recent.

``Compactor`` decides when (``trigger``), what to keep (``keep``), asks any LangChain
chat model for the summary with a timeout and retries, and rewrites the history as
``[system..., summary, kept tail]``. A failed, hung or useless summary changes
nothing: state stays as it was, a ``compaction_failed`` event says why, and the
model call falls back to the deterministic passes (``ContextGuard.prepare``).
Removed messages can be archived to a LangGraph store and searched with ``recall``;
the LangGraph branch (router, node, ``add_compaction``) is in ``compaction_graph``
and re-exported here. The settings live in ``_compaction_settings`` and one
compaction's run (plan, summary, shrink check, archive) in ``_compaction_core``;
both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore

from ..engine import CompactionError, ContextGuard, GuardEvent, log_event, marker
from ._core import CompactionResult, CompactorBase
from ._graph import compaction_node, compaction_router
from ._settings import CompactionSettings
from ._summary import last_summary
from ._trigger import FailureMemory, pause_reason

__all__ = ["Compactor", "acompact_messages", "compact_messages"]


class Compactor(CompactorBase):
    """Summarises old history with a chat model; safe to share across threads."""

    def __init__(
        self,
        summarizer: Any,
        settings: CompactionSettings | None = None,
        *,
        guard: ContextGuard | None = None,
        store: BaseStore | None = None,
        on_event: Callable[[GuardEvent], None] | None = None,
    ) -> None:
        super().__init__(summarizer, settings, guard=guard, store=store)
        self.on_event = on_event
        self._failures = FailureMemory()

    # -- when ----------------------------------------------------------------------

    def should_compact(
        self,
        messages: Sequence[BaseMessage],
        *,
        model: Any = None,
        thread_id: str | None = None,
        writer: Callable[[Any], None] | None = None,
    ) -> bool:
        """Trigger reached, the history grown since the last summary, no failed run."""
        due, tokens = self.measure(messages, model=model)
        if not due:
            return False
        limits = self._limits(model)
        prev = last_summary(messages)
        why, growth = pause_reason(
            marker(prev) if prev is not None else None,
            tokens=tokens,
            growth=limits.growth,
            cap=self.settings.max_consecutive,
            failures=self._failures.get(thread_id),
        )
        if not why:
            return True
        self._emit(
            GuardEvent(
                "compaction_failed",
                tokens_before=tokens,
                tokens_after=tokens,
                budget=limits.budget,
                detail=f"compaction skipped: {why}; next try once the history has "
                f"grown by {growth:,} tokens (the deterministic passes keep this "
                "call inside the window)",
            ),
            writer,
        )
        return False

    # -- the graph branch ------------------------------------------------------------

    def update(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = None,
        store: BaseStore | None = None,
        writer: Callable[[Any], None] | None = None,
        model: Any = None,
        config: RunnableConfig | None = None,
    ) -> dict[str, Any] | None:
        """The state update that compacts, or ``None`` (state unchanged, event sent).

        ``config`` scopes the archive (its thread id and ``{key}`` prefix labels).
        """
        if not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        try:
            result = self.compact(
                messages, model=model, thread_id=thread_id, store=store, config=config
            )
        except CompactionError as exc:
            self._failure(exc, messages, thread_id, writer)
            return None
        return self._success(result, thread_id, writer)

    async def aupdate(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = None,
        store: BaseStore | None = None,
        writer: Callable[[Any], None] | None = None,
        model: Any = None,
        config: RunnableConfig | None = None,
    ) -> dict[str, Any] | None:
        """Async ``update``."""
        if not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        try:
            result = await self.acompact(
                messages, model=model, thread_id=thread_id, store=store, config=config
            )
        except CompactionError as exc:
            self._failure(exc, messages, thread_id, writer)
            return None
        return self._success(result, thread_id, writer)

    def _success(
        self,
        result: CompactionResult,
        thread_id: str | None,
        writer: Callable[[Any], None] | None,
    ) -> dict[str, Any]:
        self._failures.clear(thread_id)
        self._emit(result.event, writer)
        key = self.settings.messages_key
        return {key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result.messages]}

    def _failure(
        self,
        exc: CompactionError,
        messages: Sequence[BaseMessage],
        thread_id: str | None,
        writer: Callable[[Any], None] | None,
    ) -> None:
        tokens = self.sent_tokens(messages)
        self._failures.record(thread_id, tokens)
        first = str(exc).split(" Fix:")[0]
        self._emit(
            GuardEvent(
                "compaction_failed",
                tokens_before=tokens,
                tokens_after=tokens,
                budget=self._limits().budget,
                detail=f"{exc.reason}: {first} State left unchanged; this model call "
                "falls back to the deterministic passes.",
            ),
            writer,
        )

    def _emit(self, event: GuardEvent, writer: Callable[[Any], None] | None) -> None:
        log_event(event)
        if self.on_event is not None:
            self.on_event(event)
        if writer is not None:
            writer({"context_guard": event.to_dict()})

    def router(
        self, next_node: str, *, compact_node: str = "compact"
    ) -> Callable[..., str]:
        """A conditional edge: ``compact_node`` when due, else ``next_node``."""
        return compaction_router(self, next_node, compact_node=compact_node)

    def node(self, name: str = "compact") -> Runnable[Any, dict[str, Any]]:
        """The graph node: returns the rewrite, or ``{}`` to leave state alone."""
        return compaction_node(self, name)


def compact_messages(
    messages: Any,
    summarizer: Any,
    settings: CompactionSettings | None = None,
    *,
    guard: ContextGuard | None = None,
    store: BaseStore | None = None,
    thread_id: str | None = None,
) -> list[BaseMessage]:
    """Compact a history once, now; raises ``CompactionError`` on any failure."""
    compactor = Compactor(summarizer, settings, guard=guard, store=store)
    return compactor.compact(messages, thread_id=thread_id).messages


async def acompact_messages(
    messages: Any,
    summarizer: Any,
    settings: CompactionSettings | None = None,
    *,
    guard: ContextGuard | None = None,
    store: BaseStore | None = None,
    thread_id: str | None = None,
) -> list[BaseMessage]:
    """Async ``compact_messages``."""
    compactor = Compactor(summarizer, settings, guard=guard, store=store)
    result = await compactor.acompact(messages, thread_id=thread_id)
    return result.messages
