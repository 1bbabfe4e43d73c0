"""``ContextGuard``: the orchestrator that applies the passes in order."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import Runnable

from ._anchor import Meter, calibration_of, sent_key
from ._compress import compress_old_tool_results
from ._errors import InvalidInputError
from ._events import EventKind, GuardEvent, GuardReport, diff_event, log_event
from ._hygiene import enforce_provider_hygiene
from ._overflow import LimitMemory
from ._policy import GuardPolicy
from ._repair import repair_tool_pairs
from ._sanitize import sanitize_messages
from ._thinking import strip_old_thinking
from ._tokens import TokenCounter, make_counter
from ._trim import trim_to_budget
from ._truncate import truncate_tool_results
from ._window import WindowInfo, check_window, model_name, resolve_window

Pass = Callable[[list[BaseMessage]], list[BaseMessage]]
_diff_event = diff_event  # the name the recovery chain imports
_SENT_MEMORY = 4_096


@dataclass(frozen=True)
class PrepareResult:
    """The messages to send and the report of what was done to them."""

    messages: list[BaseMessage]
    report: GuardReport


def to_messages(messages: Any) -> list[BaseMessage]:
    """Read anything ``convert_to_messages`` accepts, with errors that say where."""
    if (
        messages is None
        or isinstance(messages, str | bytes | dict | BaseMessage)
        or (isinstance(messages, tuple) and _is_pair(messages))
        or not isinstance(messages, Iterable)
    ):
        raise InvalidInputError(
            f"Expected a sequence of messages, got {type(messages).__name__}.",
            hint="pass a list, and wrap a single message in one: prepare([message]).",
        )
    out: list[BaseMessage] = []
    for i, item in enumerate(messages):
        if isinstance(item, BaseMessage):
            out.append(item)
            continue
        if item is None:
            raise InvalidInputError(f"Message {i} is None.", index=i)
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


def _is_pair(value: tuple[Any, ...]) -> bool:
    """A bare ``(role, content)`` tuple passed where a list of messages belongs."""
    return len(value) == 2 and isinstance(value[0], str) and isinstance(value[1], str)


class ContextGuard:
    """Keeps a history inside the model's context window.

    ``prepare`` applies the pure passes in this order, each for a reason:

    1. ``sanitize_messages``: malformed calls must go before anything counts them.
    2. ``repair_tool_pairs``: so the passes below see the history's final shape
       (their choices, e.g. compression batches counted in results, then come out
       the same when the output is prepared again: ``prepare`` is idempotent).
    3. ``truncate_tool_results``: cheap and lossless for the rest of the history.
    4. ``compress_old_tool_results``: shrinks old bulk before trimming drops turns.
    5. ``strip_old_thinking``: old reasoning is dead weight once answered.
    6. ``trim_to_budget``: drops whole turns only if the cheaper passes were not
       enough.
    7. ``compress_old_tool_results`` again: its batches count results, so once
       trimming removed some, the count of what is sent decides (as it will when
       this output is prepared again); between moves of the cut it changes nothing.
    8. ``repair_tool_pairs`` again: after every removal, so no call or result is
       orphaned.
    9. ``enforce_provider_hygiene``: last, on the final shape.

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
        # Our count of each prompt this guard prepared, keyed by its last message:
        # the reply's usage then says exactly how the provider counted it.
        self._sent: OrderedDict[tuple[Any, ...], int] = OrderedDict()

    def window(self, model: Any = None) -> WindowInfo:
        """Resolve and check the context window (seed 004's pre-flight guard)."""
        if model is None:
            model = self.model if self.model is not None else self.policy.model
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

    def as_runnable(
        self,
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
        messages_key: str = "messages",
    ) -> Runnable[Any, list[BaseMessage]]:
        """This guard as an LCEL Runnable: ``prompt | guard.as_runnable() | model``."""
        from .runnable import as_runnable

        return as_runnable(self, tools=tools, model=model, messages_key=messages_key)

    def wrap(self, model: Any, **kwargs: Any) -> Runnable[Any, BaseMessage]:
        """``model`` behind this guard, retrying on provider overflow errors."""
        from .recovery import with_overflow_recovery

        return with_overflow_recovery(model, self, **kwargs)

    def count_tokens(self, messages: Any, *, tools: Sequence[Any] | None = None) -> int:
        """Tokens of ``messages`` (and tool schemas) as the guard counts them."""
        return self._meter(to_messages(messages), tools).before

    def _meter(self, messages: list[BaseMessage], tools: Sequence[Any] | None) -> Meter:
        anchoring = self.policy.usage_anchoring
        with self._lock:
            sent = dict(self._sent) if anchoring and self._sent else {}
        return Meter(
            self.counter,
            messages,
            extra_tokens=self.counter.count_tools(tools or []),
            anchoring=anchoring,
            calibration=calibration_of(messages, sent, self.counter) if sent else None,
        )

    def _remember(
        self, original: list[BaseMessage], sent: list[BaseMessage], meter: Meter
    ) -> None:
        """Note our count of what is sent, keyed by the history's last message."""
        if not original or not original[-1].id or not self.policy.usage_anchoring:
            return
        key = sent_key(original[-1], self.counter)
        total = sum(map(meter.count, sent)) + meter.extra
        with self._lock:
            self._sent[key] = total
            self._sent.move_to_end(key)
            while len(self._sent) > _SENT_MEMORY:
                self._sent.popitem(last=False)

    def prepare(
        self,
        messages: Any,
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
        session_kind: str | None = None,
    ) -> PrepareResult:
        """Return the messages to send and a report; never mutates ``messages``.

        Token figures (report, events, the budget check) all come from one meter:
        usage-anchored while the prefix up to the anchor is untouched, calibrated
        estimates otherwise (see ``_anchor``).
        """
        original = to_messages(messages)
        info = self.window(model)
        policy = self.policy
        budget = policy.budget(info.tokens)
        meter = self._meter(original, tools)
        events: list[GuardEvent] = []
        if info.should_warn:
            events.append(self._window_warning(info, budget))
        current = original
        if policy.enabled:
            for kind, run in self._passes(budget, info.tokens, session_kind, meter):
                after = run(current)
                if after is not current:
                    event = diff_event(kind, current, after, meter, budget)
                    log_event(event)
                    events.append(event)
                    current = after
        report = GuardReport(
            tokens_before=meter.before,
            tokens_after=meter(current),
            budget=budget,
            context_window=info.tokens,
            window_source=info.source,
            counter=self.counter.name,
            events=tuple(events),
        )
        self._remember(original, current, meter)
        return PrepareResult(list(current), report)

    def _passes(
        self,
        budget: int,
        window: int,
        session_kind: str | None,
        meter: Meter,
    ) -> list[tuple[EventKind, Pass]]:
        p = self.policy

        def compress(msgs: list[BaseMessage]) -> list[BaseMessage]:
            if p.compress_trigger and meter(msgs) <= p.compress_trigger * budget:
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
            ("repair", repair_tool_pairs),
            (
                "truncate",
                lambda m: truncate_tool_results(
                    m,
                    max_chars=p.max_tool_result_chars,
                    head_chars=p.truncate_head_chars,
                    tail_chars=p.truncate_tail_chars,
                    max_tokens=int(p.max_tool_result_share * budget),
                    token_counter=meter.cost,
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
                    token_counter=meter.cost,
                    keep_first_user=p.keep_first_user,
                    turn_limit=p.turn_limit(session_kind),
                    step=p.trim_step,
                    window=window,
                    measure=meter,
                ),
            ),
            ("compress", compress),
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
