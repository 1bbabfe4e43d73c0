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

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore

from ..engine import CompactionError, ContextGuard, GuardEvent, log_event, marker
from ._background import Background, Prepared, swap_plan
from ._core import CompactionResult, CompactorBase
from ._graph import compaction_node, compaction_router
from ._plan import CompactionPlan
from ._settings import CompactionSettings
from ._summary import Summary, last_summary
from ._trigger import FailureMemory, pause_reason

logger = logging.getLogger("langchain_context_guard")

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
        self._background = Background()

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
            self._prepare(messages, tokens, model=model, thread_id=thread_id)
            return False
        limits = self._limits(model)
        why, growth = self._pause(messages, tokens, limits.growth, thread_id)
        if not why:
            return True
        self._prepare(messages, tokens, model=model, thread_id=thread_id)
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

    def _pause(
        self,
        messages: Sequence[BaseMessage],
        tokens: int,
        growth: int,
        thread_id: str | None,
    ) -> tuple[str, int]:
        prev = last_summary(messages)
        return pause_reason(
            marker(prev) if prev is not None else None,
            tokens=tokens,
            growth=growth,
            cap=self.settings.max_consecutive,
            failures=self._failures.get(thread_id),
        )

    # -- off the critical path ---------------------------------------------------

    def _prepare(
        self,
        messages: Sequence[BaseMessage],
        tokens: int,
        *,
        model: Any,
        thread_id: str | None,
    ) -> None:
        """Start the summary in the background ``background_at`` of the way there.

        Of the way to the token trigger, and while compaction pauses, of the
        growth that ends the pause. Once per thread while the prepared one
        still applies.
        """
        at = self.settings.background_at
        limits = self._limits(model)
        if at is None or not limits.trigger_tokens:
            return
        if tokens < at * limits.trigger_tokens:
            return
        held = self._background.get(thread_id)
        if held is not None and swap_plan(held.plan, messages) is not None:
            return
        if self._pause(messages, tokens, int(at * limits.growth), thread_id)[0]:
            return
        try:
            _, plan = self._start(messages, model)
        except CompactionError:
            return
        client = self._summarizer
        self._background.start(
            thread_id,
            plan,
            lambda: client.summarize(plan),
            lambda: client.asummarize(plan),
        )

    def _prepared(
        self, messages: Sequence[BaseMessage], thread_id: str | None
    ) -> tuple[Prepared, CompactionPlan] | None:
        """The thread's prepared summary and its plan today, if it still applies."""
        prepared = self._background.pop(thread_id)
        if prepared is None:
            return None
        plan = swap_plan(prepared.plan, messages)
        return (prepared, plan) if plan is not None else None

    def _swap(
        self, messages: Sequence[BaseMessage], thread_id: str | None
    ) -> tuple[CompactionPlan, Summary] | None:
        """The prepared summary, waiting for it if a thread still writes it."""
        found = self._prepared(messages, thread_id)
        if found is None:
            return None
        prepared, plan = found
        job = prepared.job
        if isinstance(job, asyncio.Task) and not job.done():
            return None  # its loop is not this thread's to wait on
        try:
            return plan, job.result()
        except (Exception, asyncio.CancelledError) as exc:
            _dropped(exc)
            return None

    async def _aswap(
        self, messages: Sequence[BaseMessage], thread_id: str | None
    ) -> tuple[CompactionPlan, Summary] | None:
        """Async ``_swap``: awaits a task of this loop, or a thread's future."""
        found = self._prepared(messages, thread_id)
        if found is None:
            return None
        prepared, plan = found
        job: asyncio.Future[Summary] = (
            prepared.job
            if isinstance(prepared.job, asyncio.Task)
            else asyncio.wrap_future(prepared.job)
        )
        if job.get_loop() is asyncio.get_running_loop():
            # Waits without taking on the job's outcome: cancelling this call
            # still cancels it, and a cancelled job is only a dropped summary.
            await asyncio.wait([job])
        if not job.done():
            return None  # a task of another loop, not this one's to wait on
        try:
            return plan, job.result()
        except (Exception, asyncio.CancelledError) as exc:
            _dropped(exc)
            return None

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
        requested: str | None = None,
    ) -> dict[str, Any] | None:
        """The state update that compacts, or ``None`` (state unchanged, event sent).

        ``config`` scopes the archive (its thread id and ``{key}`` prefix labels).
        ``requested``: the agent's model asked for a compaction now, with these
        instructions (``_request``): it runs whatever the trigger says.
        """
        if requested is None and not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        result = None
        swapped = self._swap(messages, thread_id) if requested is None else None
        if swapped is not None:
            with _dropping():
                result = _from_background(
                    self._complete(
                        list(messages), *swapped, model, thread_id, store, config
                    )
                )
        try:
            result = result or self.compact(
                messages,
                model=model,
                thread_id=thread_id,
                store=store,
                config=config,
                requested=requested,
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
        requested: str | None = None,
    ) -> dict[str, Any] | None:
        """Async ``update``."""
        if requested is None and not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        result = None
        swapped = (
            None if requested is not None else await self._aswap(messages, thread_id)
        )
        if swapped is not None:
            with _dropping():
                result = _from_background(
                    await self._acomplete(
                        list(messages), *swapped, model, thread_id, store, config
                    )
                )
        try:
            result = result or await self.acompact(
                messages,
                model=model,
                thread_id=thread_id,
                store=store,
                config=config,
                requested=requested,
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


def _from_background(result: CompactionResult) -> CompactionResult:
    detail = f"{result.event.detail}; summary prepared in the background"
    return replace(result, event=replace(result.event, detail=detail))


def _dropped(error: BaseException) -> None:
    logger.info(
        "context_guard: the summary prepared in the background was dropped (%r); "
        "summarising at the trigger instead.",
        error,
    )


@contextlib.contextmanager
def _dropping() -> Iterator[None]:
    """A prepared summary that cannot be used (``no_shrink``) is only dropped."""
    try:
        yield
    except CompactionError as exc:
        _dropped(exc)


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
