"""A whole summary from the summarizer, within a deadline, or ``CompactionError``.

``SummarizerClient`` asks for the sections (and a split turn's beginning) with
the calls of ``_calls``. A range over the summarizer's budget is asked in parts
and merged (``_chunks``). The sync deadline runs the calls on a worker thread
(which stops before its next attempt once the deadline passed); the async one
cancels the call.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any, TypeVar

from langchain_core.messages import BaseMessage

from ._answer import assemble
from ._calls import SummarizerCalls, profile_window
from ._chunks import merge_groups, merge_prompt, render_part, split_range
from ._plan import CompactionPlan
from ._request import focus
from ._summary import Summary
from ._summary_prompt import serialize

__all__ = ["SummarizerClient"]

T = TypeVar("T")


class SummarizerClient(SummarizerCalls):
    """Asks the summarizer for a plan's whole summary, within ``timeout``."""

    def summarize(self, plan: CompactionPlan) -> Summary:
        """The plan's summary; raises ``CompactionError`` (timeout, failures)."""
        return self._with_deadline(lambda stop: self._summarize(plan, stop))

    async def asummarize(self, plan: CompactionPlan) -> Summary:
        """Async ``summarize``; the timeout cancels the summarizer call."""
        try:
            return await asyncio.wait_for(self._asummarize(plan), self.settings.timeout)
        except TimeoutError:
            raise self._timeout_error() from None

    def _with_deadline(self, job: Callable[[threading.Event], T]) -> T:
        stop = threading.Event()
        if self.settings.timeout is None:
            return job(stop)
        ctx = contextvars.copy_context()
        pool = ThreadPoolExecutor(1, thread_name_prefix="context-guard-compaction")
        future = pool.submit(ctx.run, job, stop)
        pool.shutdown(wait=False)
        try:
            return future.result(timeout=self.settings.timeout)
        except FutureTimeout:
            stop.set()
            raise self._timeout_error() from None

    def _summarize(self, plan: CompactionPlan, stop: threading.Event) -> Summary:
        sections = self._sections(plan, stop) if plan.history else None
        turn = self._ask(plan, False, stop) if plan.split else None
        return assemble(plan, sections, turn)

    async def _asummarize(self, plan: CompactionPlan) -> Summary:
        jobs: list[Awaitable[Any]] = []
        if plan.history:
            jobs.append(self._asections(plan))
        if plan.split:
            jobs.append(self._aask(plan, False))
        out = list(await asyncio.gather(*jobs))
        sections = out.pop(0) if plan.history else None
        return assemble(plan, sections, out[0] if plan.split else None)

    # -- a range over the summarizer's budget: parts, then one merge ---------------

    def _parts(self, plan: CompactionPlan, budget: int) -> list[CompactionPlan]:
        """The plan, or one plan per part of its range when that is over budget.

        Only the serialised prompt of a chat model is split: an appended request
        is the conversation as sent, and a function gets the messages whole.
        """
        if not self.prompted or plan.appended:
            return [plan]
        chunks = split_range(
            plan.history, max_chars=self.settings.max_input_chars, budget=budget
        )
        if len(chunks) == 1:
            return [plan]
        return [replace(plan, previous=None, history=chunk) for chunk in chunks]

    def _budget(self, plan: CompactionPlan) -> int:
        """Characters of conversation one summary call reads.

        ``max_prompt_chars``; less when the summarizer's profile gives a window
        whose 40% (the share an overflow's retry keeps) holds fewer.
        """
        budget = self.settings.max_prompt_chars
        window = profile_window(self.model)
        if window is None or not self.prompted or plan.appended:
            return budget  # not split (``_parts``): no need to size the parts
        text = serialize(plan.history, self.settings.max_input_chars)
        tokens = max(self.count_text(text), 1)
        return max(min(budget, len(text) * (window * 2 // 5) // tokens), 1)

    @staticmethod
    def _rounds(texts: list[str], budget: int) -> list[list[str]] | None:
        """Partial summaries grouped for a round of merges; ``None``: merge all.

        ``None`` when one call reads them all, or when no two fit together.
        """
        groups = merge_groups(texts, budget)
        if len(groups) in (1, len(texts)):
            return None
        return [[texts[i] for i in group] for group in groups]

    def _sections(self, plan: CompactionPlan, stop: threading.Event) -> Any:
        budget = self._budget(plan)
        parts = self._parts(plan, budget)
        if len(parts) == 1:
            return self._ask(plan, True, stop)
        texts = [render_part(self._ask(p, True, stop, part="chunk")) for p in parts]
        while (rounds := self._rounds(texts, budget)) is not None:
            texts = [
                render_part(self._ask(plan, True, stop, prompt=self._merge(group)))
                for group in rounds
            ]
        return self._ask(plan, True, stop, prompt=self._merge(texts, plan))

    async def _asections(self, plan: CompactionPlan) -> Any:
        budget = self._budget(plan)
        parts = self._parts(plan, budget)
        if len(parts) == 1:
            return await self._aask(plan, True)
        calls = (self._aask(p, True, part="chunk") for p in parts)
        texts = [render_part(a) for a in await asyncio.gather(*calls)]
        while (rounds := self._rounds(texts, budget)) is not None:
            merges = (self._aask(plan, True, prompt=self._merge(g)) for g in rounds)
            texts = [render_part(a) for a in await asyncio.gather(*merges)]
        return await self._aask(plan, True, prompt=self._merge(texts, plan))

    def _merge(
        self, texts: list[str], plan: CompactionPlan | None = None
    ) -> list[BaseMessage]:
        """The merge prompt; ``plan``: the last merge, which updates its summary."""
        previous = plan.previous_summary if plan is not None else None
        instructions = (
            focus(self.settings.instructions, plan.requested)
            if plan is not None
            else None
        )
        return merge_prompt(texts, previous=previous, instructions=instructions)
