"""Asking the summarizer: a checked answer within a deadline, or ``CompactionError``.

Each call is retried with a doubling delay; a failed structured-output call falls
back to plain text on the next attempt. The sync deadline runs the calls on a
worker thread (which stops before its next attempt once the deadline passed); the
async one cancels the call.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.constants import TAG_NOSTREAM
from pydantic import BaseModel

from ..engine._errors import CompactionError
from ..engine._messages import text_of
from ._plan import CompactionPlan
from ._summary import Summary, SummarySections, parse_sections
from ._summary_prompt import sections_prompt, turn_prefix_prompt

if TYPE_CHECKING:
    from ._settings import CompactionSettings

T = TypeVar("T")
SUMMARIZER_TAGS = ("context_guard:summarizer", TAG_NOSTREAM)
"""Tags on every summarizer call; ``nostream`` keeps its tokens out of
``stream_mode="messages"``."""


class SummarizerClient:
    """Calls the user's summarizer (chat model, runnable or callable) for a plan."""

    def __init__(self, summarizer: Any, settings: CompactionSettings) -> None:
        self.settings = settings
        self._runnable: Runnable[Any, Any] = (
            summarizer
            if isinstance(summarizer, Runnable)
            else RunnableLambda(summarizer)
        )
        self._structured: Runnable[Any, Any] | None = None
        if isinstance(summarizer, BaseChatModel) and settings.structured == "auto":
            try:
                self._structured = summarizer.with_structured_output(SummarySections)
            except (NotImplementedError, ValueError, TypeError):
                self._structured = None

    def summarize(self, plan: CompactionPlan) -> Summary:
        """The plan's summary; raises ``CompactionError`` (timeout, failures)."""
        return self._with_deadline(lambda stop: self._summarize(plan, stop))

    async def asummarize(self, plan: CompactionPlan) -> Summary:
        """Async ``summarize``; the timeout cancels the summarizer call."""
        try:
            return await asyncio.wait_for(self._asummarize(plan), self.settings.timeout)
        except asyncio.TimeoutError:
            raise self._timeout_error() from None

    def _timeout_error(self) -> CompactionError:
        return CompactionError(
            f"The summary took longer than {self.settings.timeout} s.",
            reason="timeout",
            hint="history was left unchanged; raise `timeout` or use a faster "
            "summarizer model.",
        )

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
        sections = (
            self._ask(self._sections_prompt(plan), True, stop) if plan.history else None
        )
        turn = self._ask(self._turn_prompt(plan), False, stop) if plan.split else None
        return _assemble(plan, sections, turn)

    async def _asummarize(self, plan: CompactionPlan) -> Summary:
        jobs: list[Awaitable[Any]] = []
        if plan.history:
            jobs.append(self._aask(self._sections_prompt(plan), True))
        if plan.split:
            jobs.append(self._aask(self._turn_prompt(plan), False))
        out = list(await asyncio.gather(*jobs))
        sections = out.pop(0) if plan.history else None
        return _assemble(plan, sections, out[0] if plan.split else None)

    def _sections_prompt(self, plan: CompactionPlan) -> list[BaseMessage]:
        s = self.settings
        return sections_prompt(
            plan,
            max_chars=s.max_input_chars,
            max_total=s.max_prompt_chars,
            instructions=s.instructions,
        )

    def _turn_prompt(self, plan: CompactionPlan) -> list[BaseMessage]:
        s = self.settings
        return turn_prefix_prompt(
            plan, max_chars=s.max_input_chars, max_total=s.max_prompt_chars
        )

    def _config(self) -> RunnableConfig:
        metadata: dict[str, Any] = {"context_guard": "summarizer"}
        try:
            from langchain.agents.middleware.internal_call_transformer import (
                internal_call_metadata,
            )

            metadata.update(internal_call_metadata())
        except ImportError:  # pragma: no cover - langchain is optional
            pass
        return {
            "tags": list(SUMMARIZER_TAGS),
            "metadata": metadata,
            "run_name": "context_guard_summarizer",
        }

    def _ask(
        self, prompt: list[BaseMessage], sections: bool, stop: threading.Event
    ) -> Any:
        structured = sections and self._structured is not None
        error: Exception | None = None
        for attempt in range(self.settings.retries + 1):
            if stop.is_set():
                raise self._timeout_error()
            try:
                runnable = self._structured if structured else self._runnable
                assert runnable is not None
                return _check(runnable.invoke(prompt, self._config()), sections)
            except Exception as exc:
                error, structured = exc, False
                if attempt < self.settings.retries:
                    stop.wait(self.settings.retry_delay * 2**attempt)
        raise self._failed(error)

    async def _aask(self, prompt: list[BaseMessage], sections: bool) -> Any:
        structured = sections and self._structured is not None
        error: Exception | None = None
        for attempt in range(self.settings.retries + 1):
            try:
                runnable = self._structured if structured else self._runnable
                assert runnable is not None
                return _check(await runnable.ainvoke(prompt, self._config()), sections)
            except Exception as exc:
                error, structured = exc, False
                if attempt < self.settings.retries:
                    await asyncio.sleep(self.settings.retry_delay * 2**attempt)
        raise self._failed(error)

    def _failed(self, error: Exception | None) -> CompactionError:
        tries = self.settings.retries + 1
        err = CompactionError(
            f"The summarizer failed {tries} time(s); last error: {error!r}.",
            reason="summarizer_error",
        )
        err.__cause__ = error
        return err


def _assemble(
    plan: CompactionPlan, sections: SummarySections | None, turn: str | None
) -> Summary:
    summary = replace(
        plan.previous_summary or Summary(),
        original_request=plan.original_request,
        touched=plan.touched,
        turn_context="",
    )
    if sections is not None:
        summary = summary.with_sections(sections)
    if turn:
        request = f"Request of this turn (verbatim):\n{plan.turn_request}\n\n"
        summary = replace(summary, turn_context=request + turn)
    return summary


def _check(out: Any, sections: bool) -> Any:
    """Normalise a summarizer answer; raise on an empty or unusable one."""
    if isinstance(out, SummarySections):
        parsed: Any = out
    elif isinstance(out, BaseModel | dict) and not isinstance(out, BaseMessage):
        if not sections:
            raise TypeError(f"summarizer returned {type(out).__name__}, not text")
        data = out.model_dump() if isinstance(out, BaseModel) else out
        parsed = SummarySections.model_validate(data)
    else:
        text = text_of(out.content) if isinstance(out, BaseMessage) else out
        if not isinstance(text, str):
            raise TypeError(f"summarizer returned {type(out).__name__}, not text")
        parsed = parse_sections(text) if sections else text.strip()
    if not parsed or (sections and not any(parsed.model_dump().values())):
        raise ValueError("the summarizer returned an empty summary")
    return parsed
