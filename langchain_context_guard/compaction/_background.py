"""Summaries prepared off the critical path, and when one may be swapped in.

With ``background_at``, ``Compactor`` plans a compaction once the history
crosses that share of the token trigger and starts its summary at once: an
asyncio task on an async host (a running event loop), a thread otherwise. At
the trigger, ``swap_plan`` decides whether the prepared summary still applies:
the messages it summarised must still open the history (same ids, same order,
under the same previous summary); then the messages that came since are kept
verbatim after it and no summary call is made at the trigger. A prepared
summary that failed, timed out or no longer applies is dropped and never
changes the history: the trigger summarises in the foreground as without it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace

from cachetools import LRUCache
from langchain_core.messages import BaseMessage, SystemMessage

from ._plan import CompactionPlan
from ._summary import Summary, last_summary

__all__ = ["Background", "Prepared", "swap_plan"]


@dataclass(frozen=True)
class Prepared:
    """A summary started ahead of the trigger, and the plan it summarises."""

    plan: CompactionPlan
    job: Future[Summary] | asyncio.Task[Summary]


def _same(a: BaseMessage | None, b: BaseMessage | None) -> bool:
    """The same message: by id when both have one, else equal."""
    if a is None or b is None:
        return a is b
    if a.id and b.id:
        return a.type == b.type and a.id == b.id
    return a == b


def swap_plan(
    prepared: CompactionPlan, messages: Sequence[BaseMessage]
) -> CompactionPlan | None:
    """``prepared`` over today's ``messages``, or ``None`` if it no longer applies.

    It applies while the previous summary is the same and the messages it
    summarises still open the history; everything after them is kept.
    """
    previous = last_summary(messages)
    if not _same(previous, prepared.previous):
        return None
    system = tuple(m for m in messages if isinstance(m, SystemMessage))
    body = [
        m for m in messages if not isinstance(m, SystemMessage) and m is not previous
    ]
    prefix = (*prepared.history, *prepared.turn_prefix)
    if len(body) <= len(prefix):
        return None
    if not all(_same(a, b) for a, b in zip(prefix, body, strict=False)):
        return None
    rest = tuple(body[len(prefix) :])
    return replace(prepared, system=system, kept=rest, sent=())


class Background:
    """One prepared summary per thread (bounded), started on the right runner."""

    def __init__(self, maxsize: int = 1_024) -> None:
        self._lock = threading.Lock()
        self._jobs: LRUCache[str, Prepared] = LRUCache(maxsize)

    def get(self, thread_id: str | None) -> Prepared | None:
        """The thread's prepared summary, if one was started."""
        with self._lock:
            return self._jobs.get(thread_id or "")

    def pop(self, thread_id: str | None) -> Prepared | None:
        """Take the thread's prepared summary (it is used at most once)."""
        with self._lock:
            return self._jobs.pop(thread_id or "", None)

    def start(
        self,
        thread_id: str | None,
        plan: CompactionPlan,
        run: Callable[[], Summary],
        arun: Callable[[], Awaitable[Summary]],
    ) -> Prepared:
        """Start ``arun`` as a task on the running loop, else ``run`` on a thread."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        job: Future[Summary] | asyncio.Task[Summary]
        if loop is not None:
            job = loop.create_task(_awaited(arun))
        else:
            pool = ThreadPoolExecutor(1, thread_name_prefix="context-guard-background")
            job = pool.submit(contextvars.copy_context().run, run)
            pool.shutdown(wait=False)
        prepared = Prepared(plan, job)
        with self._lock:
            self._jobs[thread_id or ""] = prepared
        return prepared


async def _awaited(arun: Callable[[], Awaitable[Summary]]) -> Summary:
    return await arun()
