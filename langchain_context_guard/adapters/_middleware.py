"""The LangChain v1 adapter: ``ContextGuardMiddleware`` for ``create_agent``.

```python
agent = create_agent(model, tools, system_prompt=SYSTEM,
                     middleware=[ContextGuardMiddleware(guard)])
```

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
its ``response_metadata`` (``_handover``), and each call first gives the
history's records back to ``restore_state``, so any process, or one restarted
mid-thread, sends the prompt the first would have.
"""

from __future__ import annotations

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

from ..engine._handover import STATE_KEY
from ..engine._messages import same_list
from ._callbacks import aemit, emit
from ._langgraph import rewrite
from ._results import ResultArchive

if TYPE_CHECKING:
    from ..engine._events import PrepareResult
    from ..engine._guard import ContextGuard

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


class ContextGuardMiddleware(AgentMiddleware[AgentState[Any], Any, Any]):
    """Keeps every model call of a ``create_agent`` agent inside its window.

    Args:
        guard: The guard to apply (one guard may serve many agents and threads).
        persist: Also rewrite the agent's stored messages in ``before_model``
            (``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` and the kept messages). The
            state holds no system prompt or tools, so each model call is still
            pruned exactly in ``wrap_model_call``.
        model: With ``persist``, the chat model (or name) whose window the stored
            history is fit to; defaults to the guard's own model or policy.
        archive: Write the full text of every tool result the guard shortens
            to a store (``_results``); pair it with ``make_result_reader()``.
    """

    def __new__(
        cls,
        guard: ContextGuard,
        *,
        persist: bool = False,
        model: Any = None,
        archive: ResultArchive | None = None,
    ) -> ContextGuardMiddleware:
        """With ``persist``, a subclass: the only one with ``before_model``."""
        if persist and cls is ContextGuardMiddleware:
            cls = _PersistingMiddleware
        return super().__new__(cls)

    def __init__(
        self,
        guard: ContextGuard,
        *,
        persist: bool = False,
        model: Any = None,
        archive: ResultArchive | None = None,
    ) -> None:
        super().__init__()
        self.guard = guard
        self.archive = archive
        self.persist = persist
        self.model = model
        self._schemas: tuple[Any, list[Any]] | None = None

    def _tools(self, request: ModelRequest[Any]) -> list[Any]:
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

    @property
    def name(self) -> str:
        """``ContextGuardMiddleware``, whichever mode (names the graph's nodes)."""
        return "ContextGuardMiddleware"

    def _inputs(self, request: ModelRequest[Any]) -> list[BaseMessage]:
        head = [request.system_message] if request.system_message is not None else []
        return [*head, *request.messages]

    def _restore(self, inputs: list[BaseMessage], request: ModelRequest[Any]) -> None:
        """Give the history's handover records back to the guard."""
        states = {
            i: m.response_metadata[STATE_KEY]
            for i, m in enumerate(inputs)
            if isinstance(m, AIMessage) and STATE_KEY in m.response_metadata
        }
        if states:
            self.guard.restore_state(
                inputs, states, tools=self._tools(request), model=request.model
            )

    def _prepare(self, request: ModelRequest[Any]) -> tuple[PrepareResult, Any]:
        """Restore, prune, and the record to keep with the reply."""
        inputs = self._inputs(request)
        if not self.persist:
            self._restore(inputs, request)
        result = self.guard.prepare(
            inputs, tools=self._tools(request), model=request.model
        )
        if self.archive is not None:
            self.archive.save(inputs, result.messages, None)
        return result, None if self.persist else self.guard.export_state(
            inputs, model=request.model
        )

    def _apply(
        self, request: ModelRequest[Any], result: PrepareResult
    ) -> ModelRequest[Any]:
        kept = result.messages
        system = request.system_message
        if system is not None and kept and isinstance(kept[0], SystemMessage):
            system, kept = kept[0], kept[1:]
        if system is request.system_message and same_list(request.messages, kept):
            return request
        return request.override(
            messages=cast("list[AnyMessage]", kept), system_message=system
        )

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Result:
        """Prune the request, then call the model."""
        result, state = self._prepare(request)
        emit(result.report, source="middleware")
        return _stamp(handler(self._apply(request, result)), state)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Result:
        """Async ``wrap_model_call``; the counting runs in an executor."""
        result, state = await run_in_executor(None, self._prepare, request)
        await aemit(result.report, source="middleware")
        return _stamp(await handler(self._apply(request, result)), state)


def _stamp(response: Result, state: dict[str, Any] | None) -> Result:
    """Keep the handover record in the reply's ``response_metadata``."""
    if not state:
        return response
    messages = response.result if isinstance(response, ModelResponse) else [response]
    for message in messages:
        if isinstance(message, AIMessage):
            message.response_metadata[STATE_KEY] = state
            break
    return response


class _PersistingMiddleware(ContextGuardMiddleware):
    """``ContextGuardMiddleware(persist=True)``: also rewrites the stored history."""

    def before_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Rewrite the stored history to what fits."""
        messages = list(state["messages"])
        result = self.guard.prepare(messages, model=self.model)
        emit(result.report, source="middleware.before_model")
        return rewrite("messages")(messages, result.messages) or None

    async def abefore_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model``."""
        messages = list(state["messages"])
        result = await run_in_executor(
            None, self.guard.prepare, messages, model=self.model
        )
        await aemit(result.report, source="middleware.before_model")
        return rewrite("messages")(messages, result.messages) or None
