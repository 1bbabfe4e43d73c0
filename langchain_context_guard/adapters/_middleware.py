"""The LangChain v1 adapter: ``ContextGuardMiddleware`` for ``create_agent``.

```python
agent = create_agent("openai:gpt-4.1", tools, system_prompt=SYSTEM,
                     middleware=[ContextGuardMiddleware()])
```

Built like LangChain's own middlewares: no arguments (the window comes from the
agent's model on each call), flat ``GuardPolicy`` settings
(``ContextGuardMiddleware(reserve_tokens=4_000)``), a ``model`` name or object
whose window to fit, a ``token_counter``, or a ready ``ContextGuard`` /
``GuardPolicy``.

``wrap_model_call`` (and ``awrap_model_call``) prunes what each model call sends:
the request's system message and messages, with the bound tools counted against the
budget and the window resolved from ``request.model`` (its profile, else its name).
The structured-output schemas of ``response_format`` count as well: with a tool
strategy ``create_agent`` binds them as extra tools that are not in
``request.tools``.
The agent's state is left untouched unless ``persist=True``, which also rewrites
the stored history in ``before_model``.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

try:
    from langchain.agents.middleware import (
        AgentMiddleware,
        AgentState,
        ModelRequest,
        ModelResponse,
    )
    from langchain.agents.structured_output import (
        AutoStrategy,
        OutputToolBinding,
        ProviderStrategy,
        ToolStrategy,
    )
except ImportError as exc:  # pragma: no cover - exercised by a test
    raise ImportError(
        "ContextGuardMiddleware needs LangChain v1 agents (langchain>=1.0). "
        'Install it with: pip install "langchain-context-guard[agents]"'
    ) from exc

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables.config import run_in_executor
from langgraph.runtime import Runtime

from ..engine._errors import ConfigError
from ..engine._guard import ContextGuard
from ..engine._messages import same_list
from ..engine._overflow import silent_overflow
from ..engine._policy import GuardPolicy
from ._cache_control import mark_cache_breakpoints
from ._callbacks import aemit, emit, logger
from ._langgraph import rewrite

if TYPE_CHECKING:
    from ..engine._events import GuardReport, PrepareResult

Result = ModelResponse[Any] | AIMessage


def _structured_output_tools(response_format: Any) -> list[Any]:
    """The structured-output schemas a ``response_format`` sends, as tool specs.

    A ``ToolStrategy`` gives the tools ``create_agent`` binds for it (built the
    same way, from its possibly narrowed ``schema_specs``). An ``AutoStrategy``
    or a bare schema is counted as that tool strategy: it is what is bound unless
    the model has native structured output, which sends the same schema. A
    ``ProviderStrategy`` gives its ``response_format`` payload.
    """
    if isinstance(response_format, ProviderStrategy):
        return [response_format.to_model_kwargs()["response_format"]]
    if isinstance(response_format, AutoStrategy):
        response_format = ToolStrategy(schema=response_format.schema)
    elif not isinstance(response_format, ToolStrategy):
        response_format = ToolStrategy(schema=response_format)
    specs = response_format.schema_specs
    return [OutputToolBinding.from_schema_spec(spec).tool for spec in specs]


def build_guard(
    guard: ContextGuard | GuardPolicy | None,
    *,
    model: Any = None,
    token_counter: Any = None,
    settings: dict[str, Any],
) -> ContextGuard:
    """A ``ContextGuard`` from what a middleware was given.

    A ready guard is used as is (settings and a counter then belong to it); a
    policy is updated with ``settings``; nothing gives ``GuardPolicy(**settings)``.
    """
    if isinstance(guard, ContextGuard):
        if settings or token_counter is not None:
            given = ", ".join(sorted(settings) or ["token_counter"])
            raise ConfigError(
                f"Got a ready ContextGuard and also {given}.",
                field=next(iter(sorted(settings)), "token_counter"),
                hint="set them on the guard (ContextGuard(GuardPolicy(...), "
                "token_counter=...)) or pass no guard.",
            )
        return guard
    if guard is not None and not isinstance(guard, GuardPolicy):
        raise ConfigError(
            f"guard must be a ContextGuard or a GuardPolicy, got "
            f"{type(guard).__name__}.",
            field="guard",
            hint="pass ContextGuard(...), GuardPolicy(...), or settings as keywords.",
        )
    base = guard.model_dump(exclude_unset=True) if guard is not None else {}
    policy = GuardPolicy(**{**base, **settings})
    return ContextGuard(policy, token_counter=token_counter, model=model)


def _checked(response: Result, report: GuardReport) -> Result:
    """Warn when the reply reports more input than the window (silent overflow)."""
    messages = getattr(response, "result", None) or [response]
    found = silent_overflow(messages[-1], report.context_window)
    if found is not None:
        logger.warning(
            "Context guard: %s (window %s from %s); the provider may have cut the "
            "prompt. Set context_window to the model's real window.",
            found.message,
            f"{report.context_window:,}",
            report.window_source,
        )
    return response


class RequestInputs:
    """What a model request sends that the budget must hold, the same on every path.

    The system message and messages, and the tools: ``request.tools`` plus the
    structured-output tools ``create_agent`` binds beside them. Every middleware
    that sends a request to a model counts it this way (``ContextGuardMiddleware``,
    the compaction fallback, overflow recovery).
    """

    def __init__(self) -> None:
        self._schemas: tuple[Any, list[Any]] | None = None

    def tools(self, request: ModelRequest[Any]) -> list[Any]:
        """``request.tools`` and the structured-output tools bound beside them."""
        response_format = request.response_format
        if response_format is None:
            return request.tools
        cached = self._schemas
        if cached is None or cached[0] is not response_format:
            # The same tool objects each call keep the guard's tool count cached.
            cached = (response_format, _structured_output_tools(response_format))
            self._schemas = cached
        return [*request.tools, *cached[1]]

    @staticmethod
    def messages(request: ModelRequest[Any]) -> list[BaseMessage]:
        """The system message (if any) followed by the messages."""
        head = [request.system_message] if request.system_message is not None else []
        return [*head, *request.messages]

    @staticmethod
    def apply(
        request: ModelRequest[Any],
        kept: list[BaseMessage],
        *,
        split_system: bool = False,
    ) -> ModelRequest[Any]:
        """``request`` sending ``kept`` (a leading system message as its system).

        ``split_system``: also when the request had none (a marked system message
        from the history then goes where the provider caches it).
        """
        system = request.system_message
        if (
            (system is not None or split_system)
            and kept
            and isinstance(kept[0], SystemMessage)
        ):
            system, kept = kept[0], kept[1:]
        if system is request.system_message and same_list(request.messages, kept):
            return request
        return request.override(
            messages=cast("list[AnyMessage]", kept), system_message=system
        )


class ContextGuardMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keeps every model call of a ``create_agent`` agent inside its window.

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
            pruned exactly in ``wrap_model_call``.
        cache_breakpoints: Mark the stable prefix with Anthropic ``cache_control``
            breakpoints (``mark_cache_breakpoints``): True for five-minute
            entries, or the ``cache_control`` dict to use. For Anthropic models.
        **settings: Any ``GuardPolicy`` field, e.g. ``context_window=200_000``
            or ``reserve_tokens=4_000``.
    """

    def __init__(
        self,
        guard: ContextGuard | GuardPolicy | None = None,
        *,
        model: Any = None,
        token_counter: Any = None,
        persist: bool = False,
        cache_breakpoints: bool | dict[str, Any] = False,
        **settings: Any,
    ) -> None:
        super().__init__()
        self.persist = persist
        self.model = model
        self.cache_breakpoints = cache_breakpoints
        self._given = guard
        self._counter = token_counter
        self._settings = settings
        self._guard: ContextGuard | None = None
        self._lock = threading.Lock()
        if isinstance(guard, ContextGuard) or model is not None:
            self._guard = self._build(model)
        else:  # check the settings now; the guard itself waits for the model
            build_guard(guard, token_counter=token_counter, settings=settings)
        self._request = RequestInputs()

    def _build(self, model: Any) -> ContextGuard:
        return build_guard(
            self._given,
            model=model,
            token_counter=self._counter,
            settings=self._settings,
        )

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

    def _model(self, request: ModelRequest[Any]) -> Any:
        return self.model if self.model is not None else request.model

    def _tools(self, request: ModelRequest[Any]) -> list[Any]:
        return self._request.tools(request)

    def _inputs(self, request: ModelRequest[Any]) -> list[BaseMessage]:
        return RequestInputs.messages(request)

    def _apply(
        self, request: ModelRequest[Any], result: PrepareResult
    ) -> ModelRequest[Any]:
        kept = result.messages
        if self.cache_breakpoints:
            control = self.cache_breakpoints
            kept = mark_cache_breakpoints(
                kept,
                result.report.reused,
                control=control if isinstance(control, dict) else None,
            )
        return RequestInputs.apply(
            request, kept, split_system=bool(self.cache_breakpoints)
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Result:
        """Prune the request, then call the model."""
        model = self._model(request)
        result = self._guard_for(model).prepare(
            self._inputs(request), tools=self._tools(request), model=model
        )
        emit(result.report, source="middleware")
        return _checked(handler(self._apply(request, result)), result.report)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Result:
        """Async ``wrap_model_call``; the counting runs in an executor."""
        model = self._model(request)
        result = await run_in_executor(
            None,
            self._guard_for(model).prepare,
            self._inputs(request),
            tools=self._tools(request),
            model=model,
        )
        await aemit(result.report, source="middleware")
        response = await handler(self._apply(request, result))
        return _checked(response, result.report)

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """With ``persist=True``, rewrite the stored history to what fits."""
        if not self.persist:
            return None
        messages = list(state["messages"])
        result = self.guard.prepare(messages, model=self.model)
        emit(result.report, source="middleware.before_model")
        return rewrite("messages")(messages, result.messages) or None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model``."""
        if not self.persist:
            return None
        messages = list(state["messages"])
        result = await run_in_executor(
            None, self.guard.prepare, messages, model=self.model
        )
        await aemit(result.report, source="middleware.before_model")
        return rewrite("messages")(messages, result.messages) or None
