"""``ContextGuard``: the orchestrator that applies the passes in order."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from cachetools import LRUCache
from langchain_core.messages import BaseMessage

from ._binding import BindingMemory
from ._cache_clock import CacheClock
from ._call import Call, known_prompt, read_call
from ._context_usage import ContextUsage
from ._errors import ConfigError, InvalidInputError
from ._events import GuardEvent, PrepareResult, log_event
from ._input import to_messages
from ._interactive import for_replies
from ._notices import Notices
from ._overflow import LimitMemory, ignored_limit
from ._policy import GuardPolicy
from ._window import (
    WindowInfo,
    check_window,
    limit_key,
    model_name,
    output_reserve,
    resolve_window,
)
from .incremental._handover import export_state, restore_state
from .incremental._produced import keep_sent, pruned_record
from .incremental._promote import settle
from .incremental._prune import prune
from .incremental._read_history import read
from .incremental._record import Record
from .incremental._release import forget_head
from .incremental._reuse import reuse_prompt
from .incremental._stable_prefix import (
    Sent,
    conversation,
    kept_prompt_tokens,
)
from .passes._bound_thinking import keep_final_thinking
from .tokens._anchor import Gauge, Known, make_gauge, scan_history, sent_key
from .tokens._counters import REPLY_OVERHEAD, TokenCounter, make_counter
from .tokens._usage import usage_by_category

_SENT_MEMORY = 4_096
_STABLE_MEMORY = 64
"""Conversations whose last prompt a guard keeps (``stable_prefix``)."""
_RATIO_MEMORY = 256
"""Models whose count calibration a guard keeps."""


class ContextGuard:
    """Keeps a history inside the model's context window.

    ``prepare`` applies the pure passes in the order ``reference_prune`` gives
    (its docstring says what each does and why the order) and sends what
    ``reference_prepare`` gives, reached incrementally.

    With ``stable_prefix`` (the default) a call whose history extends the
    conversation's previous one re-sends the previous prompt unchanged plus the
    new messages while that fits, and only a history that no longer fits runs the
    passes, pruning to ``prune_to`` of the budget (``_stable_prefix``): the provider's
    prompt cache keeps hitting between prunings. With ``stable_prefix=False`` the
    passes run on every call and the same history always gives byte-identical
    output. One guard is safe to share across threads and conversations.
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
        self.bindings = BindingMemory()
        self._resolved: dict[tuple[bool | None, bool, bool], GuardPolicy] = {}
        self._notices = Notices(self.policy)
        self._clock = CacheClock(self.policy.cache_ttl_seconds)
        self._lock = threading.Lock()
        # One call at a time: a call reads and replaces what the last one kept
        # (its history, its record); under the GIL, turns cost little.
        self._calls = threading.RLock()
        # Our count of each prompt this guard prepared, keyed by its last message:
        # the reply's usage then says exactly how the provider counted it.
        self._sent: LRUCache[tuple[Any, ...], tuple[int, bool]] = LRUCache(_SENT_MEMORY)
        self._record: Record | None = None
        # What was sent last, per conversation (keyed by its first message).
        self._stables: LRUCache[tuple[Any, ...], Sent] = LRUCache(_STABLE_MEMORY)
        self._ends: LRUCache[tuple[Any, ...], Any] = LRUCache(_STABLE_MEMORY)
        # Conversations a record says were pruned by a guard this one cannot
        # reproduce (``_handover``): their signed reasoning has no known prompt.
        self._unknown: LRUCache[tuple[Any, ...], bool] = LRUCache(_STABLE_MEMORY)
        self._ratios: LRUCache[str, float] = LRUCache(_RATIO_MEMORY)
        self._tools: tuple[tuple[int, ...], list[Any], int] | None = None
        self._last = Known([], [], 0, -1, 0)

    def learn_limit(
        self, model: Any, limit: int, *, stated: int | None = None
    ) -> GuardEvent | None:
        """Cap ``model``'s window at ``limit`` from now on (a provider said so).

        ``stated``: the provider's figure that ``limit`` converts to our units; if
        implausible, the ``limit_ignored`` event (``_overflow.ignored_limit``) is
        logged and returned instead.
        """
        ignored = ignored_limit(stated or limit, self.policy.context_window)
        if ignored is not None:
            log_event(ignored)
            return ignored
        key = limit_key(self.model if model is None else model, self.policy.model)
        if key:
            self.limits.learn(key, limit)
        return None

    def window(self, model: Any = None, *, learned: bool = True) -> WindowInfo:
        """Resolve and check the window (``learned=False``: as the provider counts)."""
        if model is None:
            model = self.model if self.model is not None else self.policy.model
        name = limit_key(model, self.policy.model) if learned else ""
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

    def budget(self, model: Any = None, *, window: int | None = None) -> int:
        """Tokens the sent messages may use for ``model``: window minus reserve.

        The reserve is ``policy.reserve_tokens``, unless the policy leaves it at
        its default and the chat model sets ``max_tokens`` (what the reply may
        take, and what Anthropic adds to the input when checking the window).
        ``window`` replaces the resolved one (the recovery chain's limit).
        """
        if window is not None:
            return self._budget(window, model, "limit")
        info = self.window(model)
        return self._budget(info.tokens, model, info.source)

    def _budget(self, window: int, model: Any, source: str) -> int:
        policy, reserve = self.policy, None
        if "reserve_tokens" not in policy.model_fields_set:
            reserve = output_reserve(model if model is not None else self.model, window)
        if reserve is None:
            reserve = policy.reserve(window)
            if source in ("learned", "limit"):  # a provider's limit: half to send
                reserve = min(reserve, window // 2)
        budget = window - reserve
        if budget <= 0:
            raise ConfigError(
                f"GuardPolicy.reserve_tokens ({reserve:,}) leaves "
                f"nothing of the {window:,}-token window (from {source}).",
                field="reserve_tokens",
                hint="lower reserve_tokens below the model's window.",
            )
        return budget

    def count_tokens(self, messages: Any, *, tools: Sequence[Any] | None = None) -> int:
        """Tokens of ``messages`` (and tool schemas) as the guard counts them."""
        original = to_messages(messages)
        body, usage_at, usage_body = scan_history(original, self.counter.count_message)
        extra = self._tool_tokens(tools) + REPLY_OVERHEAD
        gauge = self._gauge(original, usage_at, usage_body, extra)
        return gauge.tokens(body, len(original))

    def context_usage(
        self, messages: Any, *, tools: Sequence[Any] | None = None, model: Any = None
    ) -> ContextUsage:
        """Tokens of ``messages`` and ``tools`` by category (``tokens._usage``)."""
        window = self.window(model).tokens
        tokens = self._tool_tokens(tools)
        return usage_by_category(to_messages(messages), self.counter, tokens, window)

    def _gauge(
        self,
        messages: list[BaseMessage],
        usage_at: int,
        usage_body: int,
        extra: int,
        model: Any = None,
    ) -> Gauge:
        """How this history's counts turn into tokens (``_anchor.make_gauge``).

        The ratio a history shows is remembered (per model) and carried to one
        that shows none: its latest reply came from a prompt this guard did not
        prepare, or none has usage yet.
        """
        policy = self.policy
        anchoring = policy.usage_anchoring
        sent = None
        if anchoring and usage_at >= 1:
            key = sent_key(messages[usage_at - 1], self.counter, usage_at - 1)
            with self._lock:
                sent = self._sent.get(key)
        name = self._name(model)
        with self._lock:
            carried = self._ratios.get(name)
        gauge, ratio = make_gauge(
            messages,
            usage_at=usage_at,
            usage_body=usage_body,
            extra=extra,
            anchoring=anchoring,
            sent=sent,
            carried=carried,
            margins=(policy.safety_margin, policy.uncalibrated_margin),
        )
        if ratio is not None:
            with self._lock:
                self._ratios[name] = ratio
        return gauge

    def _tool_tokens(self, tools: Sequence[Any] | None) -> int:
        """Tokens of the tool schemas (remembered for the same tool objects)."""
        if not tools:
            return 0
        key = tuple(map(id, tools))
        hit = self._tools
        if hit is not None and hit[0] == key:
            return hit[2]
        tokens = self.counter.count_tools(tools)
        self._tools = (key, list(tools), tokens)
        return tokens

    def _remember(
        self, original: list[BaseMessage], sent_tokens: int, whole: bool
    ) -> None:
        """Note our count of what is sent (and if it is ``original`` unchanged).

        Keyed by the history's last message: the reply to this prompt follows it.
        """
        if not original or not self.policy.usage_anchoring:
            return
        key = sent_key(original[-1], self.counter, len(original) - 1)
        with self._lock:
            self._sent[key] = (sent_tokens, whole)

    def prepare(
        self,
        messages: Any,
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
        session_kind: str | None = None,
        now: float | datetime | None = None,
        persist: bool = False,
    ) -> PrepareResult:
        """Return the messages to send and a report; never mutates ``messages``.

        Token figures (report, events, the budget check) all come from one gauge:
        usage-anchored while the prefix up to the anchor is untouched, calibrated
        estimates otherwise (see ``_anchor``). When ``messages`` extends the
        history of this guard's previous call, each pass only looks at what is
        new unless one of its boundaries moved (``_steps``); the result is the
        same either way. Messages are taken as values: an equal copy is the same
        message, and one edited in place must get a new ``content`` object to be
        seen as changed, within the last 2,048 messages of the previous call's
        history (``_extends.RECHECKED``); replace an older one (LangChain's
        ``model_copy``, LangGraph's ``add_messages`` by id).
        A history with nothing to send once sanitised (only empty messages)
        gives an empty list, on every call. Calls on one guard from several
        threads take turns (``_calls``). ``now`` (seconds or a ``datetime``):
        with ``cache_ttl_seconds``, a call after the cache expired prunes afresh.
        For a model that binds signed reasoning, a running tool loop's final
        turn is sent with the blocks it opened with (``keep_final_thinking``),
        though the prompt kept for the next call has the stale ones dropped.
        ``persist``: the messages returned become the stored history (a hook or
        middleware in persist mode); once the interactive settings switch, the
        trim then keeps the person's newest reply with its answer while it can
        (``GuardPolicy.keep_reply``), so the history read back still holds it.
        """
        if not isinstance(persist, bool):
            raise InvalidInputError(
                f"prepare(persist=...) must be True or False, got {persist!r}.",
                hint="pass persist=True when the messages returned replace the "
                "stored history, else leave it unset.",
            )
        bound = self.policy.enabled and self.binds(model)
        with self._calls:
            result = self._prepare(
                messages, tools, model, session_kind, now, persist=persist
            )
            sent = result.messages
            if bound:
                sent = keep_final_thinking(sent, to_messages(messages))
        measure = partial(self.context_usage, tools=tools, model=model)
        return replace(result, messages=sent, measure=measure)

    def _prepare(
        self,
        messages: Any,
        tools: Sequence[Any] | None,
        model: Any,
        session_kind: str | None,
        now: float | datetime | None = None,
        cold: bool = False,
        persist: bool = False,
    ) -> PrepareResult:
        """Re-send the last prompt while it fits, else prune (``cold``: expired)."""
        call = read_call(
            self, messages, tools, model, session_kind, now, cold, persist=persist
        )
        if call.stable is not None and call.stable.key in call.keys and not call.cold:
            reused = self._reuse(call)
            if reused is not None:
                return reused
        result, forgot = self._prune(call)
        if forgot:  # the rewrites let go of died with the pruning's steps
            sweep = getattr(self.counter, "sweep", None)
            if sweep is not None:
                sweep()  # and their counts' entries with them
        return result

    def _reuse(self, call: Call) -> PrepareResult | None:
        """The conversation's previous prompt and the new messages, if that fits."""
        assert call.stable is not None
        reused = reuse_prompt(
            call.stable,
            call.original,
            call.now.body,
            call.limits(),
            call.key.policy,
            self.counter,
            call.events,
        )
        if reused is None:
            return None
        self._remember(call.original, reused.sent_tokens, reused.whole)
        self._keep_sent(reused.sent, stored=call.persist)
        return reused.result

    def _prune(self, call: Call) -> tuple[PrepareResult, bool]:
        """The passes over the history, the report, and what to keep for next time.

        Also says whether rewrites were let go of (``_release``): their counts
        can then be swept, once this call's steps are gone.
        """
        policy, key, original = self.policy, call.key, call.original
        if original is call.given or original is call.kept_in:
            original = list(original)  # a list of its own, for the record to keep
        record = self._record
        if record is not None and not record.grows(original):
            record = None
        # A pruning: ``prune`` cuts to the cost model's share of the budget.
        size = kept_prompt_tokens(call.gauge, call.now.body, len(original))
        deep = policy.stable_prefix and (call.cold or size > key.budget)
        setting = call.setting(exact=deep)
        run, new_record = prune(
            original, call.scan(), setting, record, key, policy.enabled
        )
        forgot = False
        if new_record is not None:
            self._record = forget_head(new_record, key.budget, counter=self.counter)
            forgot = self._record.forgot > new_record.forgot
        current = run.source if policy.enabled else original
        report = call.report(run, current, self.counter.name)
        self._remember(original, run.body + key.extra, current is original)
        self._keep_sent(
            pruned_record(
                key,
                call.kept_in,
                current,
                run,
                size=len(original),
                cold=call.cold,
                count=call.count,
            ),
            stored=call.persist,
        )
        if call.counts is not None:
            call.counts.close()
        if policy.stable_prefix:
            settle(len(original))
        return PrepareResult(list(current), report), forgot

    def export_state(self, messages: Any, *, model: Any = None) -> dict[str, Any]:
        """After ``prepare(messages)``: what another process needs (``_handover``)."""
        return export_state(self, to_messages(messages), model)

    def restore_state(
        self,
        messages: Any,
        states: Mapping[int, Mapping[str, Any]],
        *,
        tools: Sequence[Any] | None = None,
        model: Any = None,
    ) -> None:
        """Take back ``export_state`` records by their reply's index (``_handover``)."""
        restore_state(self, to_messages(messages), states, tools, model)

    def _name(self, model: Any) -> str:
        return self.policy.model or model_name(model or self.model) or ""

    def learn_binding(self, model: Any = None) -> None:
        """Treat ``model`` as binding its signed reasoning from now on.

        A provider refused a block as bound to a different conversation
        (``is_binding_error``); with ``bound_thinking`` unset the guard then
        holds that model's blocks to their prefix, as for the table's models.
        """
        self.bindings.learn(self._name(model))

    def binds(self, model: Any = None) -> bool:
        """Whether ``model``'s signed reasoning is held to its prefix."""
        if self.policy.bound_thinking is not None:
            return self.policy.bound_thinking
        return self.bindings.binds(self._name(model))

    def policy_for(
        self, model: Any = None, *, replied: bool = False, persist: bool = False
    ) -> GuardPolicy:
        """The policy a call for ``model`` runs at: ``bound_thinking`` resolved.

        ``replied``: the history holds a user's reply to an answer
        (``_messages.holds_reply``); with ``interactive_tuning`` the fields the
        policy leaves unset take the interactive settings (``for_replies``),
        and with ``persist`` (the output becomes the stored history)
        ``keep_reply`` too, unless set.
        """
        policy = self.policy
        binds = None if policy.bound_thinking is not None else self.binds(model)
        tuned = replied and policy.interactive_tuning
        if binds is None and not tuned:
            return policy
        kept = tuned and persist
        resolved = self._resolved.get((binds, tuned, kept))
        if resolved is None:
            update = for_replies(policy, persist=kept) if tuned else {}
            if binds is not None:
                update["bound_thinking"] = binds
            resolved = policy.model_copy(update=update) if update else policy
            self._resolved[binds, tuned, kept] = resolved
        return resolved

    def _read(
        self, messages: Any
    ) -> tuple[list[BaseMessage], Known | None, list[Any] | None, list[BaseMessage]]:
        """``_read_history.read`` against the previous call's history."""
        return read(self._last, messages, self._lock)

    def _last_sent(self, original: list[BaseMessage]) -> Sent | None:
        if not original or not self.policy.enabled:
            return None
        with self._lock:
            return self._stables.get(conversation(original))

    def _produced_prompt(self, original: list[BaseMessage]) -> list[BaseMessage] | None:
        """``_call.known_prompt``: the prompt this guard last sent ``original``."""
        return known_prompt(self, original)

    def _keep_sent(self, sent: Sent, *, stored: bool = False) -> None:
        if self.policy.stable_prefix or self.policy.bound_thinking is not False:
            with self._lock:
                keep_sent(self._stables, self._ends, sent, stored=stored)
                if sent.source:  # its own prompt now: the one replies follow
                    self._unknown.pop(conversation(sent.source), None)
