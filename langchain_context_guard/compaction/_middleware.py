"""``CompactionMiddleware``: LLM compaction for LangChain v1 ``create_agent``.

Built like LangChain's ``SummarizationMiddleware``::

    CompactionMiddleware(model="openai:gpt-4.1-mini", trigger=("fraction", 0.8),
                         keep=("messages", 20))

``before_model`` rewrites the state with ``[system..., summary, kept tail]`` when
the trigger is reached; when compaction fails, times out or is paused, state stays
as it was and ``wrap_model_call`` fits that one call with the deterministic passes.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.middleware.internal_call_transformer import (
        InternalCallTransformer,
    )
except ImportError as exc:  # pragma: no cover - exercised only without langchain
    raise ImportError(
        "CompactionMiddleware needs the `langchain` package (create_agent). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore

from ..adapters import RequestInputs, clear_host_cutoffs
from ..engine import ConfigError, ContextGuard, GuardPolicy
from ._calls import (
    SENT_PREFIX,
    SentPrefix,
    SerializedSummaryWarning,
    chat_model,
)
from ._compactor import Compactor
from ._graph import make_recall_tool
from ._request import make_compaction_tool, requested_compaction
from ._settings import CompactionSettings

# LangChain's names whose meaning differs here: why, and what to use instead.
_DIFFERENT = {
    "summary_prompt": (
        "it writes a sectioned summary with its own prompt",
        "pass instructions='...' to add what the summary must focus on.",
    ),
    "trim_tokens_to_summarize": (
        "each summary call is capped in characters (a longer range is "
        "summarised in parts, then merged)",
        "pass max_prompt_chars=... instead.",
    ),
}


_THREADS = 1_024
"""Threads whose last call's system prompt and tools are remembered."""


def _settings(base: CompactionSettings | None, given: dict[str, Any]) -> Any:
    for name, (why, instead) in _DIFFERENT.items():
        if name in given:
            raise ConfigError(
                f"CompactionMiddleware does not take {name!r}: {why}.",
                field=name,
                hint=instead,
            )
    if not given:
        return base
    current = base.model_dump(exclude_unset=True) if base is not None else {}
    return CompactionSettings(**{**current, **given})


def _running_config() -> RunnableConfig | None:
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return None


class CompactionMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Summarise old history before a model call, safely (see ``Compactor``).

    Args:
        model: The chat model whose window is managed and which writes the
            summaries, or its name for ``init_chat_model``
            (``"openai:gpt-4.1-mini"``), as in LangChain's
            ``SummarizationMiddleware``. A runnable or a callable returning text
            also works (then the window comes from ``guard``).
        settings: A ready ``CompactionSettings``; keywords below override it.
        trigger: When to compact, in LangChain's forms: ``("fraction", 0.8)``,
            ``("tokens", N)``, ``("messages", n)``, a dict clause
            ``{"tokens": 4000, "messages": 10}`` (all reached), or a list of
            these (any reached). ``None``: never, as in LangChain. Default
            ``"auto"``: the lower of 0.8 of the window and the budget.
        keep: Newest history kept verbatim: ``("messages", 20)``,
            ``("tokens", N)`` or ``("fraction", f)``.
        token_counter: Counts tokens instead of tiktoken: a chat model or a
            callable over a message list (the trigger calls it once with the
            whole history, as LangChain does), ``"approximate"`` (LangChain's
            ``count_tokens_approximately``), or a ``TokenCounter``.
        summarizer: A different chat model (or name) to write the summaries;
            ``model`` still gives the window. A function or other runnable
            receives the messages to summarise (``list[BaseMessage]``, a previous
            summary first) and returns the summary text, as in LangChain.
        guard: A ``ContextGuard`` or ``GuardPolicy``: counting, the window and
            the fallback passes; by default built for ``model``.
        store: Archive for removed messages; defaults to the agent's store.
        fallback: Fit an over-budget call with ``guard.prepare`` (without
            touching state), e.g. after a failed compaction.
        recall: Also give the agent a ``recall`` tool over the archive.
        compaction_tool: Also give the agent a ``compact_context`` tool with
            which its model asks for a compaction now, with instructions for
            the summary: the next model call works from a summary whatever the
            trigger says (``_request``).
        **more: Any other ``CompactionSettings`` field (``timeout``,
            ``retries``, ``instructions``, ``max_prompt_chars``, ``mode``, ...).
    """

    transformers = (InternalCallTransformer,)

    def __init__(
        self,
        model: Any = None,
        settings: CompactionSettings | None = None,
        *,
        trigger: Any = ...,
        keep: Any = ...,
        token_counter: Any = None,
        summarizer: Any = None,
        guard: ContextGuard | GuardPolicy | None = None,
        store: BaseStore | None = None,
        fallback: bool = True,
        recall: bool = False,
        compaction_tool: bool = False,
        **more: Any,
    ) -> None:
        super().__init__()
        if model is None and summarizer is None:
            raise ConfigError(
                "CompactionMiddleware needs a model to write the summaries.",
                field="model",
                hint='pass model="provider:model" or a chat model object.',
            )
        given = {"trigger": trigger, "keep": keep, **more}
        given = {k: v for k, v in given.items() if v is not ...}
        model = chat_model(model)
        self.model = model
        writer = chat_model(summarizer) if summarizer is not None else model
        if not isinstance(guard, ContextGuard):
            window = model if isinstance(model, BaseChatModel) else None
            policy = guard or GuardPolicy()
            guard = ContextGuard(policy, token_counter=token_counter, model=window)
        elif token_counter is not None:
            raise ConfigError(
                "Got a ready ContextGuard and also token_counter.",
                field="token_counter",
                hint="set token_counter on the guard, or pass no guard.",
            )
        self.compactor = Compactor(
            writer, _settings(settings, given), guard=guard, store=store
        )
        self.compactor.agent_model = model
        self.fallback = fallback
        prefix = self.compactor.settings.namespace_prefix
        self.tools = (
            [make_recall_tool(store, namespace_prefix=prefix)] if recall else []
        )
        self.compaction_tool = compaction_tool
        if compaction_tool:
            self.tools.append(make_compaction_tool())
        self._request = RequestInputs()
        self._sent: OrderedDict[str, SentPrefix] = OrderedDict()
        """Each thread's last model call's system prompt and tools (``append``)."""
        self._warned = False

    def _remember(self, request: ModelRequest[Any], prepared: bool) -> None:
        if self.compactor.settings.summary_mode != "append":
            return
        info = getattr(request.runtime, "execution_info", None)
        thread = info.thread_id if info is not None else None
        if thread is None:
            return  # one slot would mix every conversation's system prompt
        tools = tuple(self._request.tools(request))
        sent = SentPrefix(request.system_message, tools, prepared)
        self._sent[thread] = sent
        self._sent.move_to_end(thread)
        while len(self._sent) > _THREADS:
            self._sent.popitem(last=False)

    def _prefix(self, args: dict[str, Any]) -> Any:
        """Set ``SENT_PREFIX`` to this thread's last call (reset with the token).

        A thread none of whose calls was seen, or a run without a thread id,
        gets the serialised summary: its system prompt and tools are unknown.
        """
        thread = args["thread_id"]
        if thread is None and self.compactor.settings.summary_mode == "append":
            self._warn_serialized()
        return SENT_PREFIX.set(self._sent.get(thread) or SentPrefix(seen=False))

    def _warn_serialized(self) -> None:
        if self._warned:
            return
        self._warned = True
        warnings.warn(
            "CompactionMiddleware(summary_mode='append') runs without a thread id, "
            "so it cannot tell one conversation's system prompt and tools from "
            "another's: its summaries are asked with the serialised prompt "
            "instead. Fix: give the agent a checkpointer and "
            "config={'configurable': {'thread_id': ...}}, or pass "
            "summary_mode='serialize'.",
            SerializedSummaryWarning,
            stacklevel=2,
        )

    def _args(self, runtime: Runtime[Any]) -> dict[str, Any]:
        info = runtime.execution_info
        return {
            "thread_id": info.thread_id if info is not None else None,
            "store": self.compactor.store or runtime.store,
            "writer": runtime.stream_writer,
            "config": _running_config(),
        }

    def _requested(self, state: AgentState[Any]) -> str | None:
        """The model's request for a compaction now, if it just made one."""
        if not self.compaction_tool:
            return None
        return requested_compaction(state["messages"])

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Compact the state when due; ``None`` leaves it as it is.

        A compaction also clears a host summarizer's cut into the old messages
        (deepagents', see ``clear_host_cutoffs``).
        """
        args = self._args(runtime)
        token = self._prefix(args)
        try:
            update = self.compactor.update(
                list(state["messages"]), **args, requested=self._requested(state)
            )
        finally:
            SENT_PREFIX.reset(token)
        return clear_host_cutoffs(state, update)

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model``."""
        args = self._args(runtime)
        token = self._prefix(args)
        try:
            update = await self.compactor.aupdate(
                list(state["messages"]), **args, requested=self._requested(state)
            )
        finally:
            SENT_PREFIX.reset(token)
        return clear_host_cutoffs(state, update)

    def _fit(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """The request within budget, counted as ``ContextGuardMiddleware`` counts.

        The system message, the messages and every tool sent (structured output
        included) count against the budget.
        """
        guard = self.compactor.guard
        messages = RequestInputs.messages(request)
        tools = self._request.tools(request)
        budget = guard.budget(request.model)
        if not self.fallback or guard.count_tokens(messages, tools=tools) <= budget:
            return request
        fitted = guard.prepare(messages, tools=tools, model=request.model)
        return RequestInputs.apply(request, fitted.messages)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        """Fit an over-budget call with the deterministic passes."""
        fitted = self._fit(request)
        self._remember(request, fitted is not request)
        return handler(fitted)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        """Async ``wrap_model_call``."""
        fitted = self._fit(request)
        self._remember(request, fitted is not request)
        return await handler(fitted)
