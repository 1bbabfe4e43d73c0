"""LLM compaction: summarise old messages, keep the recent.

``Compactor`` decides when (``trigger``), what to keep (``keep``), asks any LangChain
chat model for the summary with a timeout and retries, and rewrites the history as
``[system..., summary, kept tail]``. A failed, hung or useless summary changes
nothing: state stays as it was, a ``compaction_failed`` event says why, and the
model call falls back to the deterministic passes (``ContextGuard.prepare``).
Removed messages can be archived to a LangGraph store and searched with ``recall``;
the LangGraph branch (router, node, ``add_compaction``) is in ``compaction_graph``
and re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import BaseMessage, RemoveMessage
from langchain_core.runnables import Runnable
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import BaseStore, PutOp
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._archive import aarchive, archive, archive_ops
from ._compaction import CompactionPlan, Mode, plan_compaction, rebuild
from ._compaction_trigger import (
    ContextSize,
    FailureMemory,
    Limits,
    clauses,
    next_streak,
    pause_reason,
    resolve_limits,
)
from ._errors import CompactionError, ConfigError
from ._events import GuardEvent, log_event
from ._guard import ContextGuard, to_messages
from ._messages import label, marker
from ._summarizer import SUMMARIZER_TAGS, SummarizerClient
from ._summary import Summary, SummarySections, last_summary, summary_message
from ._tokens import count_messages
from .compaction_graph import (
    ARCHIVE_NS,
    add_compaction,
    archive_namespace,
    compaction_node,
    compaction_router,
    make_recall_tool,
    recall_messages,
)

__all__ = [
    "ARCHIVE_NS",
    "SUMMARIZER_TAGS",
    "CompactionPlan",
    "CompactionResult",
    "CompactionSettings",
    "Compactor",
    "ContextSize",
    "Mode",
    "Summary",
    "SummarySections",
    "acompact_messages",
    "add_compaction",
    "archive_namespace",
    "compact_messages",
    "make_recall_tool",
    "recall_messages",
]


class CompactionSettings(BaseModel):
    """When to compact, what to keep, and how patient to be with the summarizer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    trigger: ContextSize | list[ContextSize] | None = Field(
        None,
        description="Compact when any is reached: ('tokens', N), ('fraction', f) of "
        "the window, ('messages', n). None: the lower of 0.8 of the window (seed "
        "002) and window - reserve_tokens (pi-mono).",
    )
    keep: ContextSize = Field(
        ("tokens", 20_000),
        description="Newest history kept verbatim; capped at half the token "
        "trigger so one compaction always makes room.",
    )
    mode: Mode = Field(
        "keep_recent",
        description="'rebuild' keeps only system + summary + latest user message "
        "(seed 002).",
    )
    timeout: float | None = Field(
        60.0, gt=0, description="Seconds for the whole summary, retries included."
    )
    retries: int = Field(2, ge=0, description="Extra attempts after a failed call.")
    retry_delay: float = Field(
        1.0, ge=0, description="Seconds before retry k, doubled each time."
    )
    max_consecutive: int = Field(
        2,
        ge=1,
        description="Compactions (or failures) in a row that may end over the "
        "trigger before compaction pauses until the history grows by `keep` again.",
    )
    structured: Literal["auto", "never"] = Field(
        "auto", description="Ask for structured output when the model supports it."
    )
    max_input_chars: int = Field(
        4_000, ge=500, description="Characters of each message the summarizer sees."
    )
    max_prompt_chars: int = Field(
        300_000,
        ge=10_000,
        description="Characters of conversation in one summary prompt; the middle "
        "of a longer one is cut out (about 80k tokens by default).",
    )
    max_request_chars: int = Field(
        8_000, ge=500, description="The verbatim original request is cut beyond this."
    )
    instructions: str | None = Field(
        None, description="Extra focus appended to the summary prompt."
    )
    messages_key: str = Field("messages", description="The state key of messages.")

    @field_validator("trigger", "keep")
    @classmethod
    def _check_sizes(cls, value: Any) -> Any:
        clauses = value if isinstance(value, list) else [] if value is None else [value]
        for kind, size in clauses:
            if kind == "fraction" and not 0 < size <= 1:
                raise ValueError(f"a fraction must be in (0, 1], got {size}")
            if kind != "fraction" and size <= 0:
                raise ValueError(f"{kind} must be positive, got {size}")
        return value

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err["loc"] else "settings"
            raise ConfigError(
                f"CompactionSettings.{name}: {err['msg']} (got {err.get('input')!r}).",
                field=name,
                hint=f"see CompactionSettings.{name}'s description.",
            ) from None


@dataclass(frozen=True)
class CompactionResult:
    """The rewritten history and what was done."""

    messages: list[BaseMessage]
    removed: tuple[BaseMessage, ...]
    summary: Summary
    event: GuardEvent


class Compactor:
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
        self.settings = settings or CompactionSettings()
        self.guard = guard or ContextGuard()
        self.store = store
        self.on_event = on_event
        self._summarizer = SummarizerClient(summarizer, self.settings)
        self._failures = FailureMemory()

    # -- measuring -------------------------------------------------------------

    def tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a history, as the guard counts them."""
        anchoring = self.guard.policy.usage_anchoring
        return count_messages(messages, self.guard.counter, anchoring=anchoring)

    def _limits(self, model: Any = None) -> Limits:
        window = self.guard.window(model).tokens
        budget = self.guard.policy.budget(window)
        s = self.settings
        return resolve_limits(s.trigger, s.keep, window=window, budget=budget)

    def triggered(self, messages: Sequence[BaseMessage], *, model: Any = None) -> bool:
        """Whether the history has reached the trigger."""
        trigger = clauses(self.settings.trigger)
        if any(k == "messages" and len(messages) >= v for k, v in trigger):
            return True
        limit = self._limits(model).trigger_tokens
        return limit is not None and self.tokens(messages) >= limit

    def should_compact(
        self,
        messages: Sequence[BaseMessage],
        *,
        model: Any = None,
        thread_id: str | None = None,
        writer: Callable[[Any], None] | None = None,
    ) -> bool:
        """Trigger reached, and no run of useless or failed compactions to stop."""
        if not self.triggered(messages, model=model):
            return False
        tokens = self.tokens(messages)
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

    def plan(
        self, messages: Sequence[BaseMessage], *, model: Any = None
    ) -> CompactionPlan | None:
        """What a compaction would summarise and keep (no model call)."""
        limits = self._limits(model)
        return plan_compaction(
            messages,
            count=self.guard.counter.count_message,
            keep_tokens=limits.keep_tokens,
            keep_messages=limits.keep_messages,
            mode=self.settings.mode,
            max_request_chars=self.settings.max_request_chars,
        )

    # -- compacting --------------------------------------------------------------

    def compact(
        self,
        messages: Any,
        *,
        model: Any = None,
        thread_id: str | None = None,
        store: BaseStore | None = None,
    ) -> CompactionResult:
        """Summarise now (no trigger check); raises ``CompactionError``."""
        msgs, plan = self._start(messages, model)
        summary = self._summarizer.summarize(plan)
        result = self._finish(msgs, plan, summary, model)
        target = store or self.store
        if target is not None:
            archive(target, self._archive_ops(result, plan, thread_id))
        return result

    async def acompact(
        self,
        messages: Any,
        *,
        model: Any = None,
        thread_id: str | None = None,
        store: BaseStore | None = None,
    ) -> CompactionResult:
        """Async ``compact``; the timeout cancels the summarizer call."""
        msgs, plan = self._start(messages, model)
        summary = await self._summarizer.asummarize(plan)
        result = self._finish(msgs, plan, summary, model)
        target = store or self.store
        if target is not None:
            await aarchive(target, self._archive_ops(result, plan, thread_id))
        return result

    def _start(
        self, messages: Any, model: Any
    ) -> tuple[list[BaseMessage], CompactionPlan]:
        msgs = to_messages(messages)
        plan = self.plan(msgs, model=model)
        if plan is None:
            raise CompactionError(
                "Nothing to compact: the history is only what must be kept.",
                reason="nothing_to_compact",
                hint="lower `keep`, or let the deterministic passes trim instead.",
            )
        return msgs, plan

    def _finish(
        self,
        messages: list[BaseMessage],
        plan: CompactionPlan,
        summary: Summary,
        model: Any,
    ) -> CompactionResult:
        before = self.tokens(messages)
        prev = marker(plan.previous) if plan.previous is not None else None
        number = int(prev.get("number", 0)) + 1 if prev else 1
        draft = rebuild(plan, summary_message(summary, number=number))
        after = self.tokens(draft)
        limits = self._limits(model)
        if after >= before:
            raise CompactionError(
                f"The summary did not shrink the history ({before:,} -> {after:,} "
                "tokens).",
                reason="no_shrink",
                hint="history was left unchanged; lower `keep` or use a more "
                "concise summarizer.",
            )
        message = summary_message(
            summary,
            number=number,
            tokens_before=before,
            tokens_after=after,
            replaced=len(plan.removed),
            over=self.triggered(draft, model=model),
            streak=next_streak(prev, before=before, growth=limits.growth),
            split=plan.split,
        )
        new = rebuild(plan, message)
        removed = tuple(label(m, i) for i, m in enumerate(plan.removed))
        event = GuardEvent(
            "compaction",
            removed=removed,
            added=(message.id or "",),
            tokens_before=before,
            tokens_after=after,
            budget=limits.budget,
            detail=f"summary #{number} replaced {len(plan.removed)} message(s)"
            f"{' (split turn)' if plan.split else ''}; kept {len(plan.kept)} verbatim",
        )
        return CompactionResult(new, plan.removed, summary, event)

    def _archive_ops(
        self, result: CompactionResult, plan: CompactionPlan, thread_id: str | None
    ) -> list[PutOp]:
        number = int((marker(result.messages[len(plan.system)]) or {}).get("number", 0))
        return archive_ops(plan.removed, number=number, thread_id=thread_id)

    # -- the graph branch ------------------------------------------------------------

    def update(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = None,
        store: BaseStore | None = None,
        writer: Callable[[Any], None] | None = None,
        model: Any = None,
    ) -> dict[str, Any] | None:
        """The state update that compacts, or ``None`` (state unchanged, event sent)."""
        if not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        try:
            result = self.compact(
                messages, model=model, thread_id=thread_id, store=store
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
    ) -> dict[str, Any] | None:
        """Async ``update``."""
        if not self.should_compact(
            messages, model=model, thread_id=thread_id, writer=writer
        ):
            return None
        try:
            result = await self.acompact(
                messages, model=model, thread_id=thread_id, store=store
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
        tokens = self.tokens(messages)
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
