"""``ContextGuard``: the orchestrator that applies the passes in order."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages

from ._compress import compress_old_tool_results
from ._errors import InvalidInputError
from ._events import EventKind, GuardEvent, GuardReport, log_event
from ._hygiene import enforce_provider_hygiene
from ._messages import label
from ._overflow import LimitMemory
from ._policy import GuardPolicy
from ._repair import repair_tool_pairs
from ._sanitize import sanitize_messages
from ._thinking import strip_old_thinking
from ._tokens import REPLY_OVERHEAD, TokenCounter, find_anchor, make_counter
from ._trim import trim_to_budget
from ._truncate import truncate_tool_results
from ._window import WindowInfo, check_window, model_name, resolve_window

Pass = Callable[[list[BaseMessage]], list[BaseMessage]]


@dataclass(frozen=True)
class PrepareResult:
    """The messages to send and the report of what was done to them."""

    messages: list[BaseMessage]
    report: GuardReport


def to_messages(messages: Any) -> list[BaseMessage]:
    """Read anything ``convert_to_messages`` accepts, with errors that say where."""
    if messages is None or isinstance(messages, str | bytes | dict):
        raise InvalidInputError(
            f"Expected a sequence of messages, got {type(messages).__name__}.",
            hint="wrap a single message in a list: prepare([message]).",
        )
    out: list[BaseMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        if isinstance(item, dict) and item.get("content", "") is None:
            item = {**item, "content": ""}
        try:
            out.extend(convert_to_messages([item]))
        except (ValueError, KeyError, TypeError, NotImplementedError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InvalidInputError(
                f"Message {i} cannot be read ({first}).", index=i
            ) from None
    return out


class ContextGuard:
    """Keeps a history inside the model's context window.

    ``prepare`` applies seven pure passes in this order, each for a reason:

    1. ``sanitize_messages``: malformed calls must go before anything counts them.
    2. ``truncate_tool_results``: cheap and lossless for the rest of the history.
    3. ``compress_old_tool_results``: shrinks old bulk before trimming drops turns.
    4. ``strip_old_thinking``: old reasoning is dead weight once answered.
    5. ``trim_to_budget``: drops whole turns only if the cheaper passes were not
       enough.
    6. ``repair_tool_pairs``: after every removal, so no call or result is orphaned.
    7. ``enforce_provider_hygiene``: last, on the final shape.

    The same history always gives byte-identical output, so an unchanged prefix
    stays cacheable by the provider. One guard is safe to share across threads.
    """

    def __init__(
        self,
        policy: GuardPolicy | None = None,
        *,
        token_counter: Any = None,
        model: Any = None,
    ) -> None:
        self.policy = policy or GuardPolicy()
        self.model = model
        name = self.policy.model or model_name(model)
        self.counter: TokenCounter = make_counter(
            token_counter,
            model=name,
            image_tokens=self.policy.image_tokens,
            chars_per_token=self.policy.chars_per_token,
        )
        self.limits = LimitMemory()
        self._warned: set[int] = set()
        self._lock = threading.Lock()

    def window(self, model: Any = None) -> WindowInfo:
        """Resolve and check the context window (seed 004's pre-flight guard)."""
        model = model if model is not None else self.model
        name = self.policy.model or model_name(model) or ""
        tokens, source = resolve_window(
            override=self.policy.context_window,
            model=model,
            default=self.policy.default_context_window,
            learned=self.limits.get(name) if name else None,
        )
        return check_window(
            tokens,
            source,
            hard_min=self.policy.hard_min_tokens,
            warn_below=self.policy.warn_below_tokens,
        )

    def count_tokens(self, messages: Any, *, tools: Sequence[Any] | None = None) -> int:
        """Tokens of ``messages`` (and tool schemas) as the guard counts them."""
        msgs = to_messages(messages)
        counts = [self.counter.count_message(m) for m in msgs]
        anchor = find_anchor(msgs, counts) if self.policy.usage_anchoring else None
        base = sum(counts) + REPLY_OVERHEAD + self.counter.count_tools(tools or [])
        if anchor is None:
            return base
        k, prefix = anchor
        return base - sum(counts[: k + 1]) + prefix

    def prepare(
        self,
        messages: Any,
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
        session_kind: str | None = None,
    ) -> PrepareResult:
        """Return the messages to send and a report; never mutates ``messages``."""
        original = to_messages(messages)
        info = self.window(model)
        policy = self.policy
        budget = policy.budget(info.tokens)
        tools_tokens = self.counter.count_tools(tools or [])
        count = self.counter.count_message
        counts = [count(m) for m in original]
        estimate = sum(counts) + REPLY_OVERHEAD + tools_tokens
        anchor = find_anchor(original, counts) if policy.usage_anchoring else None
        scale = 1.0
        before = estimate
        if anchor is not None:
            k, prefix = anchor
            before = estimate - sum(counts[: k + 1]) + prefix
            scale = max(before / estimate, 0.8)

        def measure(msgs: list[BaseMessage]) -> int:
            if msgs is original:
                return before
            if (
                anchor is not None
                and len(msgs) > anchor[0]
                and all(msgs[i] is original[i] for i in range(anchor[0] + 1))
            ):
                rest = sum(count(m) for m in msgs[anchor[0] + 1 :])
                return anchor[1] + rest + REPLY_OVERHEAD + tools_tokens
            body = sum(count(m) for m in msgs) + REPLY_OVERHEAD
            return math.ceil(body * scale) + tools_tokens

        events: list[GuardEvent] = []
        if info.should_warn:
            events.append(self._window_warning(info, budget))
        current = original
        if policy.enabled:
            for kind, run in self._passes(
                budget, info.tokens, tools_tokens, scale, session_kind, measure
            ):
                after = run(current)
                if after is not current:
                    event = _diff_event(kind, current, after, measure, budget)
                    log_event(event)
                    events.append(event)
                    current = after
        report = GuardReport(
            tokens_before=before,
            tokens_after=measure(current),
            budget=budget,
            context_window=info.tokens,
            window_source=info.source,
            counter=self.counter.name,
            events=tuple(events),
        )
        return PrepareResult(list(current), report)

    def _passes(
        self,
        budget: int,
        window: int,
        tools_tokens: int,
        scale: float,
        session_kind: str | None,
        measure: Callable[[list[BaseMessage]], int],
    ) -> list[tuple[EventKind, Pass]]:
        p = self.policy
        count = self.counter.count_message

        def compress(msgs: list[BaseMessage]) -> list[BaseMessage]:
            if measure(msgs) <= p.compress_trigger * budget:
                return msgs
            return compress_old_tool_results(
                msgs,
                keep_recent=p.keep_recent_tool_results,
                min_chars=p.compress_min_chars,
                head_lines=p.compress_head_lines,
                tail_lines=p.compress_tail_lines,
                batch=p.compress_batch,
            )

        return [
            ("sanitize", sanitize_messages),
            (
                "truncate",
                lambda m: truncate_tool_results(
                    m,
                    max_chars=p.max_tool_result_chars,
                    head_chars=p.truncate_head_chars,
                    tail_chars=p.truncate_tail_chars,
                    max_tokens=int(p.max_tool_result_share * budget),
                    token_counter=count,
                    max_message_chars=p.max_chars_per_message,
                ),
            ),
            ("compress", compress),
            (
                "strip_thinking",
                lambda m: strip_old_thinking(m, keep_recent=p.keep_recent_thinking),
            ),
            (
                "trim",
                lambda m: trim_to_budget(
                    m,
                    budget=budget,
                    token_counter=count,
                    keep_first_user=p.keep_first_user,
                    turn_limit=p.turn_limit(session_kind),
                    step=p.trim_step,
                    extra_tokens=tools_tokens,
                    scale=scale,
                    window=window,
                ),
            ),
            ("repair", repair_tool_pairs),
            ("hygiene", enforce_provider_hygiene),
        ]

    def _window_warning(self, info: WindowInfo, budget: int) -> GuardEvent:
        event = GuardEvent(
            "window_warning",
            budget=budget,
            detail=f"context window {info.tokens:,} tokens (from {info.source}) is "
            f"below the recommended {self.policy.warn_below_tokens:,}",
        )
        with self._lock:
            first = info.tokens not in self._warned
            self._warned.add(info.tokens)
        if first:
            log_event(event)
        return event


def _diff_event(
    kind: EventKind,
    before: list[BaseMessage],
    after: list[BaseMessage],
    measure: Callable[[list[BaseMessage]], int],
    budget: int,
) -> GuardEvent:
    if len(before) == len(after):
        changed = [
            label(b, i)
            for i, (b, a) in enumerate(zip(before, after, strict=True))
            if a is not b
        ]
        removed: list[str] = []
        added: list[str] = []
    else:
        kept = {id(m) for m in after}
        gone = {id(m) for m in before}
        old = {m.id: label(m, i) for i, m in enumerate(before) if id(m) not in kept}
        new = {m.id: label(m, i) for i, m in enumerate(after) if id(m) not in gone}
        old_unnamed = [
            label(m, i) for i, m in enumerate(before) if id(m) not in kept and not m.id
        ]
        new_unnamed = [
            label(m, i) for i, m in enumerate(after) if id(m) not in gone and not m.id
        ]
        changed = [lbl for mid, lbl in old.items() if mid and mid in new]
        removed = [lbl for mid, lbl in old.items() if mid and mid not in new]
        added = [lbl for mid, lbl in new.items() if mid and mid not in old]
        removed += old_unnamed
        added += new_unnamed
    return GuardEvent(
        kind,
        changed=tuple(changed),
        removed=tuple(removed),
        added=tuple(added),
        tokens_before=measure(before),
        tokens_after=measure(after),
        budget=budget,
    )
