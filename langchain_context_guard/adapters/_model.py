"""The guard inside ``create_react_agent``'s model call: no node, no superstep.

```python
agent = create_react_agent(guarded_model(guard, model, tools=tools), tools,
                           prompt=SYSTEM)
```

A ``pre_model_hook`` is a graph node: one more superstep, so one more
checkpoint, per model call. ``SqliteSaver`` writes every channel into every
checkpoint, so that checkpoint holds the whole history again (+29% storage over
a 200-step run, BENCHMARKS.md). ``guarded_model`` is a dynamic ``model`` for
``create_react_agent`` instead: the agent node hands it the exact prompt (its
``prompt`` applied), it prunes that, calls the model with the tools bound and
returns the reply. Nothing is added to the state, nor a step.

Many workers: as ``ContextGuardMiddleware``, the reply carries the guard's
handover record in its ``response_metadata`` and each call gives the records it
needs back to ``restore_state`` first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor

from ..engine import (
    STATE_KEY,
    ConfigError,
    ContextGuard,
    needed_records,
    read_record,
    to_messages,
)
from ._callbacks import aemit, emit, usage_of
from ._clock import call_time
from ._results import ResultArchive, archiving

Resolver = Callable[[Any, Any], Runnable[Any, BaseMessage]]


def _messages(value: Any) -> list[BaseMessage]:
    """What a chat model reads from ``value``: a string is one user message."""
    if isinstance(value, str):
        return [HumanMessage(value)]
    if isinstance(value, PromptValue):
        return value.to_messages()
    return to_messages(value)


def guarded_model(
    guard: ContextGuard,
    model: Any,
    *,
    tools: Sequence[Any] | None = None,
    archive: ResultArchive | None = None,
) -> Resolver:
    """A dynamic ``model`` for ``create_react_agent`` that prunes each call.

    Args:
        guard: The guard to apply (one guard may serve many agents and threads).
        model: The chat model; its window (profile or name) applies.
        tools: The agent's tools: bound to the model here (a dynamic model
            gets none from the agent) and counted against the budget.
        archive: Write the full text of every tool result the guard shortens
            to a store (``_results``); pair it with ``make_result_reader()``.

    Returns:
        ``(state, runtime) -> runnable``, as ``create_react_agent`` takes.
    """
    if not hasattr(model, "invoke"):
        raise ConfigError(
            f"guarded_model needs a chat model object, got {type(model).__name__}.",
            field="model",
        )
    guard = archiving(guard, archive)
    tool_list = list(tools) if tools else None
    bound = model.bind_tools(tool_list) if tool_list else model

    def prepare(
        inputs: list[BaseMessage], config: RunnableConfig
    ) -> tuple[Any, dict[str, Any]]:
        states = needed_records(inputs, read_record)
        if states:
            guard.restore_state(inputs, states, tools=tool_list, model=model)
        result = guard.prepare(
            inputs, tools=tool_list, model=model, now=call_time(guard)
        )
        if archive is not None:
            archive.save(inputs, result.messages, config)
        return result, guard.export_state(inputs, model=model)

    def call(value: Any, config: RunnableConfig) -> BaseMessage:
        result, state = prepare(_messages(value), config)
        emit(
            result.report,
            source="model",
            config=config,
            usage=usage_of(guard, result),
        )
        return _stamp(bound.invoke(result.messages, config), state)

    async def acall(value: Any, config: RunnableConfig) -> BaseMessage:
        result, state = await run_in_executor(config, prepare, _messages(value), config)
        await aemit(
            result.report,
            source="model",
            config=config,
            usage=usage_of(guard, result),
        )
        return _stamp(await bound.ainvoke(result.messages, config), state)

    runnable: Runnable[Any, BaseMessage] = RunnableLambda(
        call, afunc=acall, name="context_guard_model"
    )

    def resolve(state: Any, runtime: Any) -> Runnable[Any, BaseMessage]:
        return runnable

    return resolve


def _stamp(reply: Any, state: dict[str, Any]) -> BaseMessage:
    """Keep the handover record in the reply's ``response_metadata``."""
    if state and isinstance(reply, AIMessage):
        reply.response_metadata[STATE_KEY] = state
    return cast(BaseMessage, reply)
