"""The LangChain v1 adapter: ``ContextGuardMiddleware`` for ``create_agent``.

```python
agent = create_agent("openai:gpt-4.1", tools, system_prompt=SYSTEM,
                     middleware=[ContextGuardMiddleware()])
```

Built like LangChain's own middlewares: no arguments (the window comes from the
agent's model on each call), flat ``GuardPolicy`` settings
(``ContextGuardMiddleware(reserve_tokens=4_000)``), a ``model`` name or object
whose window to fit, a ``token_counter``, or a ready ``ContextGuard`` /
``GuardPolicy``. ``ContextEditingMiddleware``'s ``edits=[ClearToolUsesEdit(...)]``
and its keywords are read where they map (``_editing``).

``wrap_model_call`` (and ``awrap_model_call``) prunes what each model call sends:
the request's system message and messages, with the bound tools counted against the
budget and the window resolved from ``request.model`` (its profile, else its name).
The structured-output schemas of ``response_format`` count as well: with a tool
strategy ``create_agent`` binds them as extra tools that are not in
``request.tools``.
The agent's state is left untouched unless ``persist=True``, which also rewrites
the stored history in ``before_model``; without it the middleware defines no
``before_model`` (``create_agent`` adds a graph node, so a superstep and a
checkpoint per model call, for each middleware class that defines one).

Many workers: each reply carries the guard's tiny ``export_state`` record in
its ``response_metadata`` (``engine._handover``), and each call first gives the
records it needs (the latest ones, read back from the end) to
``restore_state``, so any process, or one restarted mid-thread, sends the
prompt the first would have. ``archive`` writes the full
text of every tool result the guard shortens to a store (``_results``).

With ``GuardPolicy.report_usage`` the reply's ``response_metadata`` also carries
the prompt's usage by category (``ContextUsage.to_dict()``, under ``USAGE_KEY``);
with ``usage_notices`` the model gets a note past those fractions of its window.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
except ImportError as exc:  # pragma: no cover - exercised by a test
    raise ImportError(
        "ContextGuardMiddleware needs LangChain v1 agents (langchain>=1.0). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables.config import run_in_executor
from langgraph.runtime import Runtime

from ..engine import (
    ConfigError,
    ContextGuard,
    ContextUsage,
    needed_records,
    read_record,
    usage_notice,
)
from ._breakpoint_cap import CapBreakpoints
from ._cache_control import mark_cache_breakpoints
from ._callbacks import aemit, emit, usage_of
from ._clock import call_time
from ._editing import EDIT_NAMES, read_editing
from ._host_cutoffs import clear_host_cutoffs
from ._langgraph import rewrite
from ._pins import make_pin_tools
from ._provider_compaction import ProviderCompaction, check_trigger
from ._requests import (
    RequestInputs,
    Result,
    build_guard,
    stamp_reply,
    warn_silent_overflow,
)
from ._results import ResultArchive, archiving
from ._thinking_binding import DropStaleThinking

if TYPE_CHECKING:
    from ..engine import GuardPolicy, PrepareResult


_OWN = (
    "guard",
    "model",
    "token_counter",
    "persist",
    "archive",
    "cache_breakpoints",
    *EDIT_NAMES,
    "provider_drops_stale_thinking",
    "provider_compaction",
    "pin_tools",
)
"""``ContextGuardMiddleware``'s own keywords (the rest are ``GuardPolicy`` fields)."""


def _pin_tools(pin_tools: bool | int) -> list[Any]:
    """``make_pin_tools`` when asked: True for the default cap, a number for that."""
    if pin_tools is False:
        return []
    if pin_tools is True:
        return make_pin_tools()
    if not isinstance(pin_tools, int) or pin_tools < 1:
        raise ConfigError(
            f"ContextGuardMiddleware: pin_tools must be a bool or a whole number "
            f"of at least 1 (got {pin_tools!r}).",
            field="pin_tools",
            hint="pass True (at most 8 pinned at once), or how many the model "
            "may hold pinned, or False for no pin tools.",
        )
    return make_pin_tools(max_pins=pin_tools)


class ContextGuardMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keeps every model call of a ``create_agent`` agent inside its window.

    What it writes into messages: nothing but a small record in each reply's
    ``response_metadata["context_guard"]`` (``{"sent": [tokens, whole], "base":
    n}``, and a count ratio once usage is seen: our count of the prompt sent and
    where the last pruning cut). It is checkpointed with the reply, so another
    worker, or this one after a restart, rebuilds the same prompt (keeping the
    provider's prompt cache warm) and reads the reply's usage against what was
    really sent. The state itself is rewritten only with ``persist=True``.

    Args:
        guard: A ready ``ContextGuard`` (one may serve many agents and threads)
            or a ``GuardPolicy``; by default one is built from ``settings``.
        model: The chat model, or its name (``"openai:gpt-4.1"``), whose window
            and tokenizer to fit; by default the agent's model of each call
            (its ``profile["max_input_tokens"]``, else the built-in table).
        token_counter: Counts tokens instead of tiktoken: a chat model, a
            callable over messages, or a ``TokenCounter``.
        persist: Also rewrite the agent's stored messages in ``before_model``
            (``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` and the kept messages). The
            state holds no system prompt or tools, so each model call is still
            pruned exactly in ``wrap_model_call``. Both prepare the messages as
            the stored history (``prepare(persist=True)``: a person's newest
            reply stays with its answer while it fits).
        archive: Write the full text of every tool result the guard shortens
            to a store (``ResultArchive``); pair it with ``make_result_reader()``.
        cache_breakpoints: Mark the stable prefix with Anthropic ``cache_control``
            breakpoints: True for five-minute entries, or the ``cache_control``
            dict; each request then holds at most 4, any middleware's counted.
        provider_drops_stale_thinking: Also ask Anthropic to drop any stale
            signed thinking block itself rather than refuse the request (the
            beta ``thinking.block_binding.prefix_mismatch_behavior =
            "drop_block"``, on a copy of the agent's model). Only for an
            Anthropic model with thinking on; others are called as they are.
            None (the default): for the models the guard holds to binding
            (``ContextGuard.binds``), whose running tool loop's final turn keeps
            its block even when a pruning made it stale.
        provider_compaction: Also ask the provider to compact the conversation
            once its input reaches this many tokens (True: 0.8 of the budget):
            Anthropic's server-side compaction, OpenAI's Responses compaction
            (``_provider_compaction``). The reply's compaction block is kept in
            state and later calls are sent from it; other models are called as
            they are, with a ``ProviderCompactionWarning``.
        pin_tools: Also give the agent ``pin_message`` and ``unpin_message``
            (``make_pin_tools``): the model keeps a message verbatim, named by
            its tool call id, until it releases it (True: at most 8 pinned at
            once; a number: that many).
        **settings: Any ``GuardPolicy`` field, e.g. ``context_window=200_000``
            or ``reserve_tokens=4_000``; or ``ContextEditingMiddleware``'s
            ``edits=[ClearToolUsesEdit(...)]`` or its names: ``keep`` (newest
            tool results kept whole), ``trigger`` (tokens before old results are
            compressed), ``exclude_tools`` (tools whose results are never
            truncated or compressed); the others raise ``ConfigError``.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> ContextGuardMiddleware:
        """With ``persist``, a subclass: the only one with ``before_model``."""
        if kwargs.get("persist") and cls is ContextGuardMiddleware:
            cls = _PersistingMiddleware
        return super().__new__(cls)

    def __init__(
        self,
        guard: ContextGuard | GuardPolicy | None = None,
        *,
        model: Any = None,
        token_counter: Any = None,
        persist: bool = False,
        archive: ResultArchive | None = None,
        cache_breakpoints: bool | dict[str, Any] = False,
        provider_drops_stale_thinking: bool | None = None,
        provider_compaction: bool | int = False,
        pin_tools: bool | int = False,
        **settings: Any,
    ) -> None:
        super().__init__()
        self.tools = _pin_tools(pin_tools)
        self.archive = archive
        self.persist = persist
        self.model = model
        self.cache_breakpoints = cache_breakpoints
        self._options: list[Any] = []
        """Copies of the agent's model with request options, in order."""
        if cache_breakpoints:
            self._options.append(CapBreakpoints())
        if provider_drops_stale_thinking is not False:
            binds = None if provider_drops_stale_thinking else self._binds
            self._options.append(DropStaleThinking(binds))
        if provider_compaction is not False:
            trigger = check_trigger(provider_compaction)
            budget = self._budget
            self._options.append(ProviderCompaction(trigger, budget))
        self._given = guard
        self._counter = token_counter
        self._editing = read_editing(settings, ready=isinstance(guard, ContextGuard))
        if self._editing is not None:
            settings = {**settings, **self._editing.settings}
        self._settings = settings
        self._guard: ContextGuard | None = None
        self._lock = threading.Lock()
        if isinstance(guard, ContextGuard) or model is not None:
            self._guard = self._build(model)
        else:  # check the settings now; the guard itself waits for the model
            build_guard(
                guard,
                token_counter=token_counter,
                settings=settings,
                owner="ContextGuardMiddleware",
                own=_OWN,
            )
        self._request = RequestInputs()

    def _build(self, model: Any) -> ContextGuard:
        def build(settings: dict[str, Any]) -> ContextGuard:
            return build_guard(
                self._given,
                model=model,
                token_counter=self._counter,
                settings=settings,
                owner="ContextGuardMiddleware",
                own=_OWN,
            )

        guard = build(self._settings)
        if self._editing is not None and self._editing.trigger is not None:
            share = self._editing.compress_trigger(guard.budget(model))
            guard = build({**self._settings, **share})
        return archiving(guard, self.archive)

    @property
    def name(self) -> str:
        """``ContextGuardMiddleware``, whichever mode (names the graph's nodes)."""
        return "ContextGuardMiddleware"

    @property
    def guard(self) -> ContextGuard:
        """The guard in use (built from the first call's model when not given)."""
        return self._guard_for(None)

    def _guard_for(self, model: Any) -> ContextGuard:
        guard = self._guard
        if guard is None:
            with self._lock:
                if self._guard is None:
                    # The agent's model names the tokenizer (o200k for gpt-4.1).
                    self._guard = self._build(model)
                guard = self._guard
        return guard

    def _budget(self, model: Any) -> int:
        return self._guard_for(model).budget(self.model or model)

    def _binds(self, model: Any) -> bool:
        return self._guard_for(model).binds(self.model or model)

    def _model(self, request: ModelRequest[Any]) -> Any:
        return self.model if self.model is not None else request.model

    def _tools(self, request: ModelRequest[Any]) -> list[Any]:
        return self._request.tools(request)

    def _inputs(self, request: ModelRequest[Any]) -> list[BaseMessage]:
        return self._mark(RequestInputs.messages(request))

    def _mark(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        editing = self._editing
        return messages if editing is None else editing.mark(messages)

    def _restored(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        editing = self._editing
        return messages if editing is None else editing.restore(messages)

    def _restore(
        self, guard: ContextGuard, inputs: list[BaseMessage], request: ModelRequest[Any]
    ) -> None:
        """Give the history's handover records back to the guard.

        Only those ``restore_state`` uses, read back from the end
        (``needed_records``): not a scan of the whole history on every call.
        """
        states = needed_records(inputs, read_record)
        if states:
            guard.restore_state(
                inputs, states, tools=self._tools(request), model=self._model(request)
            )

    def _prepare(
        self, request: ModelRequest[Any]
    ) -> tuple[PrepareResult, dict[str, Any] | None]:
        """Restore, prune, archive; and the record to keep with the reply."""
        model = self._model(request)
        guard = self._guard_for(model)
        inputs = self._inputs(request)
        if not self.persist:
            self._restore(guard, inputs, request)
        result = guard.prepare(
            inputs,
            tools=self._tools(request),
            model=model,
            now=call_time(guard),
            persist=self.persist,
        )
        if self.archive is not None:
            self.archive.save(inputs, result.messages, None)
        state = None if self.persist else guard.export_state(inputs, model=model)
        return result, state

    def _usage(self, result: PrepareResult) -> ContextUsage | None:
        """The prompt's usage by category, if the policy reports it or notes it."""
        policy = self._guard_for(None).policy
        wanted = policy.report_usage or policy.usage_notices
        return result.usage() if wanted else None

    def _noted(
        self,
        request: ModelRequest[Any],
        result: PrepareResult,
        usage: ContextUsage | None,
    ) -> tuple[HumanMessage | None, ContextUsage | None]:
        """The usage note this call sends, if any, and ``usage`` counting it.

        None for a model that binds signed reasoning: the reply would be bound
        to a prompt ending in a note the next call leaves out, so its block
        would be stale on every later call.
        """
        guard = self._guard_for(None)
        fractions = guard.policy.usage_notices
        if usage is None or not fractions or self._binds(self._model(request)):
            return None, usage
        last = result.messages[-1] if result.messages else None
        note = usage_notice(usage, fractions, last)
        if note is None:
            return None, usage
        tokens = guard.counter.count_message(note)
        return note, replace(
            usage, notes=usage.notes + tokens, messages=usage.messages + 1
        )

    def _apply(
        self,
        request: ModelRequest[Any],
        result: PrepareResult,
        note: HumanMessage | None,
    ) -> ModelRequest[Any]:
        kept = self._restored(result.messages)
        if note is not None:  # this call only: never stored in the state
            kept = [*kept, note]
        if self.cache_breakpoints:
            control = self.cache_breakpoints
            kept = mark_cache_breakpoints(
                kept,
                result.report.reused,
                control=control if isinstance(control, dict) else None,
            )
        applied = RequestInputs.apply(
            request, kept, split_system=bool(self.cache_breakpoints)
        )
        model = applied.model
        for option in self._options:
            model = option.model(model)
        return applied if model is applied.model else applied.override(model=model)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Result:
        """Prune the request, then call the model."""
        result, state = self._prepare(request)
        note, usage = self._noted(request, result, self._usage(result))
        emit(result.report, source="middleware", usage=self._reported(usage))
        response = handler(self._apply(request, result, note))
        checked = warn_silent_overflow(
            response, result.report, self._guard_for(None), self._model(request)
        )
        return stamp_reply(checked, state, self._reported(usage))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Result:
        """Async ``wrap_model_call``; the counting runs in an executor."""
        result, state = await run_in_executor(None, self._prepare, request)
        usage = await run_in_executor(None, self._usage, result)
        note, usage = self._noted(request, result, usage)
        await aemit(result.report, source="middleware", usage=self._reported(usage))
        response = await handler(self._apply(request, result, note))
        checked = warn_silent_overflow(
            response, result.report, self._guard_for(None), self._model(request)
        )
        return stamp_reply(checked, state, self._reported(usage))

    def _reported(
        self, usage: ContextUsage | None
    ) -> Callable[[], ContextUsage] | None:
        """``usage`` as the callbacks take it, when the policy reports usage."""
        if usage is None or not self._guard_for(None).policy.report_usage:
            return None
        return lambda: usage


class _PersistingMiddleware(ContextGuardMiddleware):
    """``ContextGuardMiddleware(persist=True)``: also rewrites the stored history."""

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Rewrite the stored history to what fits (``clear_host_cutoffs`` too)."""
        messages: list[BaseMessage] = list(state["messages"])
        guard = self.guard
        result = guard.prepare(
            self._mark(messages), model=self.model, now=call_time(guard), persist=True
        )
        emit(
            result.report,
            source="middleware.before_model",
            usage=usage_of(self.guard, result),
        )
        update = rewrite("messages")(messages, self._restored(result.messages))
        return clear_host_cutoffs(state, update) or None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model``."""
        messages: list[BaseMessage] = list(state["messages"])
        result = await run_in_executor(
            None,
            self.guard.prepare,
            self._mark(messages),
            model=self.model,
            now=call_time(self.guard),
            persist=True,
        )
        await aemit(
            result.report,
            source="middleware.before_model",
            usage=usage_of(self.guard, result),
        )
        update = rewrite("messages")(messages, self._restored(result.messages))
        return clear_host_cutoffs(state, update) or None
