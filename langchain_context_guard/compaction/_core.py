"""One compaction, start to finish: plan, summarise, check it shrank, archive.

``CompactorBase`` is what ``compact_messages`` needs: no trigger memory, no events.
``compaction.Compactor`` adds when to compact (trigger, pauses after useless or
failed runs) and the state update for a graph or agent.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.store.base import BaseStore, PutOp

from ..engine import (
    CallableCounter,
    CompactionError,
    ContextGuard,
    GuardEvent,
    count_messages,
    holds_reply,
    label,
    marker,
    to_messages,
    truncate_tool_results,
)
from ._archive import aarchive, archive, archive_ops, archive_scope
from ._calls import SENT_PREFIX
from ._plan import CompactionPlan, plan_compaction, rebuild
from ._reported import reported_tokens
from ._settings import CompactionSettings
from ._summarizer import SummarizerClient
from ._summary import Summary, summary_message
from ._trigger import Limits, next_streak, resolve_limits

__all__ = ["CompactionResult", "CompactorBase"]


@dataclass(frozen=True)
class CompactionResult:
    """The rewritten history and what was done."""

    messages: list[BaseMessage]
    removed: tuple[BaseMessage, ...]
    summary: Summary
    event: GuardEvent


class CompactorBase:
    """Plans and runs one compaction with a chat model; no trigger memory."""

    def __init__(
        self,
        summarizer: Any,
        settings: CompactionSettings | None = None,
        *,
        guard: ContextGuard | None = None,
        store: BaseStore | None = None,
    ) -> None:
        self.settings = settings or CompactionSettings()
        self.guard = guard or ContextGuard()
        self.store = store
        count = self.guard.counter.count_message
        self._summarizer = SummarizerClient(
            summarizer, self.settings, lambda text: count(HumanMessage(text))
        )
        self.agent_model: Any = None
        """The agent's chat model, whose provider reported usage must come from
        (``CompactionMiddleware`` sets it; else the guard's model)."""

    # -- measuring -------------------------------------------------------------

    def tokens(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a history, as the guard counts them.

        A user's list counter (a callable or a chat model's
        ``get_num_tokens_from_messages``) gets the whole list in one call, as
        LangChain's ``SummarizationMiddleware`` calls it, so the trigger fires
        where it fires there.
        """
        counter = self.guard.counter
        if isinstance(counter, CallableCounter):
            return counter.count_list(messages)
        anchoring = self.guard.policy.usage_anchoring
        return count_messages(messages, self.guard.counter, anchoring=anchoring)

    def _limits(self, model: Any = None) -> Limits:
        window = self.guard.window(model).tokens
        budget = self.guard.budget(model)
        s = self.settings
        return resolve_limits(s.trigger, s.keep, window=window, budget=budget)

    def sent_tokens(self, messages: Sequence[BaseMessage], *, model: Any = None) -> int:
        """Tokens of the history once the guard's per-message cuts are applied.

        A huge tool output counts as ``truncate_tool_results`` leaves it (the
        guard's caps, as it sends it), so output the guard cuts anyway never sets
        off a summary. Old results the guard compresses count whole: masking them
        is what keeps the prompt small until a summary is due, and counting them
        masked would put every summary off until the masked history alone filled
        the window. With per-tool ``tool_policies`` (caps of their own) tool
        results count whole, as before.
        """
        p = self.guard.policy
        whole = bool(p.tool_policies)  # the engine resolves their caps and patterns
        share = p.max_tool_result_share * p.budget(self.guard.window(model).tokens)
        cut = truncate_tool_results(
            messages,
            max_chars=sys.maxsize if whole else p.max_tool_result_chars,
            head_chars=p.truncate_head_chars,
            tail_chars=p.truncate_tail_chars,
            max_tokens=None if whole else int(share),
            token_counter=self.guard.counter.count_message,
            max_message_chars=p.max_chars_per_message,
            dedupe_calls=p.dedupe_call_text,
        )
        tokens = self.tokens(messages)
        return tokens if cut is messages else min(tokens, self.tokens(cut))

    def measure(
        self, messages: Sequence[BaseMessage], *, model: Any = None
    ) -> tuple[bool, int]:
        """Whether the trigger is reached, and the tokens it was judged on.

        The history's own count first (cheap, and never under what is sent); only
        when that reaches the trigger, the count as sent (``sent_tokens``). The
        provider's count of the last call (``reported_tokens``) reaches a size
        too, as in LangChain's ``SummarizationMiddleware``.
        """
        limits = self._limits(model)
        if not limits.clauses:
            return False, 0
        needs_tokens = any(k == "tokens" for c in limits.clauses for k, _ in c)
        if not needs_tokens:
            return limits.reached(0, len(messages)), 0
        reported = reported_tokens(messages, self._provider_model(model))
        tokens = self.tokens(messages)
        if limits.reached(tokens, len(messages)):
            tokens = self.sent_tokens(messages, model=model)
        tokens = max(tokens, reported)
        return limits.reached(tokens, len(messages)), tokens

    def _provider_model(self, model: Any) -> Any:
        """The model whose provider a reported usage must come from."""
        if model is not None:
            return model
        return self.agent_model if self.agent_model is not None else self.guard.model

    def triggered(self, messages: Sequence[BaseMessage], *, model: Any = None) -> bool:
        """Whether the prompt the guard sends for the history reaches the trigger."""
        return self.measure(messages, model=model)[0]

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
            user_tokens=self.settings.keep_user_tokens,
        )

    # -- compacting --------------------------------------------------------------

    def compact(
        self,
        messages: Any,
        *,
        model: Any = None,
        thread_id: str | None = None,
        store: BaseStore | None = None,
        config: RunnableConfig | None = None,
        requested: str | None = None,
    ) -> CompactionResult:
        """Summarise now (no trigger check); raises ``CompactionError``.

        With a store, the removed messages are archived in the conversation's
        namespace: ``thread_id``, else the one in ``config``; the ``{key}``
        labels of ``namespace_prefix`` come from ``config["configurable"]``.
        Without a thread id nothing is archived and the event says so.
        ``requested``: the agent's model asked for it, with these instructions
        (``_request``).
        """
        msgs, plan = self._start(messages, model, requested)
        summary = self._summarizer.summarize(plan)
        return self._complete(msgs, plan, summary, model, thread_id, store, config)

    def _complete(
        self,
        messages: list[BaseMessage],
        plan: CompactionPlan,
        summary: Summary,
        model: Any,
        thread_id: str | None,
        store: BaseStore | None,
        config: RunnableConfig | None,
    ) -> CompactionResult:
        """The rebuilt history for a plan and its summary, the removed archived."""
        result = self._finish(messages, plan, summary, model)
        target = store or self.store
        if target is None:
            return result
        ops, result = self._archive_ops(result, plan, thread_id, config)
        if ops:
            archive(target, ops)
        return result

    async def acompact(
        self,
        messages: Any,
        *,
        model: Any = None,
        thread_id: str | None = None,
        store: BaseStore | None = None,
        config: RunnableConfig | None = None,
        requested: str | None = None,
    ) -> CompactionResult:
        """Async ``compact``; the timeout cancels the summarizer call."""
        msgs, plan = self._start(messages, model, requested)
        summary = await self._summarizer.asummarize(plan)
        return await self._acomplete(
            msgs, plan, summary, model, thread_id, store, config
        )

    async def _acomplete(
        self,
        messages: list[BaseMessage],
        plan: CompactionPlan,
        summary: Summary,
        model: Any,
        thread_id: str | None,
        store: BaseStore | None,
        config: RunnableConfig | None,
    ) -> CompactionResult:
        """Async ``_complete``."""
        result = self._finish(messages, plan, summary, model)
        target = store or self.store
        if target is None:
            return result
        ops, result = self._archive_ops(result, plan, thread_id, config)
        if ops:
            await aarchive(target, ops)
        return result

    def _start(
        self, messages: Any, model: Any, requested: str | None = None
    ) -> tuple[list[BaseMessage], CompactionPlan]:
        msgs = to_messages(messages)
        plan = self.plan(msgs, model=model)
        if plan is None:
            raise CompactionError(
                "Nothing to compact: the history is only what must be kept.",
                reason="nothing_to_compact",
                hint="lower `keep`, or let the deterministic passes trim instead.",
            )
        last = SENT_PREFIX.get()
        if self.settings.summary_mode == "append" and (last is None or last.seen):
            sent = self._as_sent(msgs, plan, model)
            plan = replace(plan, appended=True, sent=sent)
        if requested is not None:
            plan = replace(plan, requested=requested)
        return msgs, plan

    def _as_sent(
        self, messages: list[BaseMessage], plan: CompactionPlan, model: Any
    ) -> tuple[BaseMessage, ...]:
        """The history as the agent's call sends it, if not the state as it is.

        That is the guard's prepared prompt, unless ``CompactionMiddleware`` saw
        the agent send the state unchanged; the state too when the prepared
        prompt does not end with the kept messages (the instruction counts them).
        """
        last = SENT_PREFIX.get()
        if last is not None and not last.prepared:
            return ()
        sent = self.guard.prepare(messages, model=model).messages
        tail = (*plan.turn_prefix, *plan.kept)
        ids = [m.id for m in sent[len(sent) - len(tail) :]] if tail else []
        if len(sent) < len(tail) or ids != [m.id for m in tail]:
            return ()
        return tuple(sent)

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
            sent_after=self.sent_tokens(draft, model=model),
            replaced=len(plan.removed),
            over=self.triggered(draft, model=model),
            streak=next_streak(prev, before=before, growth=limits.growth),
            split=plan.split,
            **({"replied": True} if holds_reply(messages) else {}),
        )
        new = rebuild(plan, message)
        words, pins = len(plan.user_words), len(plan.pinned)
        also = f" and {words} user message(s)" if words else ""
        also += f" and {pins} pinned message(s)" if pins else ""
        removed = tuple(label(m, i) for i, m in enumerate(plan.removed))
        event = GuardEvent(
            "compaction",
            removed=removed,
            added=(message.id or "",),
            tokens_before=before,
            tokens_after=after,
            budget=limits.budget,
            detail=f"summary #{number} replaced {len(plan.removed)} message(s)"
            f"{' (split turn)' if plan.split else ''}; kept {len(plan.kept)} verbatim"
            f"{also}",
        )
        return CompactionResult(new, plan.removed, summary, event)

    def _archive_ops(
        self,
        result: CompactionResult,
        plan: CompactionPlan,
        thread_id: str | None,
        config: RunnableConfig | None,
    ) -> tuple[list[PutOp], CompactionResult]:
        """The puts that archive the removed messages, or none and a noted event."""
        values = (config or {}).get("configurable") or {}
        if thread_id is None and values.get("thread_id") is not None:
            thread_id = str(values["thread_id"])
        prefix = self.settings.namespace_prefix
        namespace, why = archive_scope(prefix, thread_id, values)
        if namespace is None:
            detail = f"{result.event.detail}; removed messages not archived: {why}"
            return [], replace(result, event=replace(result.event, detail=detail))
        number = int((marker(result.messages[len(plan.system)]) or {}).get("number", 0))
        return archive_ops(plan.removed, number=number, namespace=namespace), result
