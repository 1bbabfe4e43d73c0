"""The LangGraph adapters: a ``pre_model_hook`` and a node for ``StateGraph``.

```python
agent = create_react_agent(model, tools, prompt=SYSTEM,
                           pre_model_hook=pre_model_hook(guard, tools=tools,
                                                         system_prompt=SYSTEM))
```

By default the hook returns ``{"llm_input_messages": [...]}``: the model gets the
guarded copy and the stored history is never changed (the
model sees a transformed copy). ``mode="persist"`` rewrites the state instead, with
``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` followed by the kept messages.

``llm_input_messages`` is a channel of the graph: its value (the pruned copy of
the history) is written to every checkpoint and doubles their size. Give the
agent ``state_schema=GuardedAgentState``, whose ``llm_input_messages`` is an
``UntrackedValue`` that LangGraph never checkpoints.

Many workers: with ``GuardedAgentState`` the ``llm_input`` hook also keeps the
guard's handover records (``engine._handover``: the index of the reply each
prompt precedes, what was sent, where the prompt was last pruned afresh; two
records, under a hundred bytes each) in the checkpointed ``context_guard`` key,
and gives them back to ``restore_state`` before pruning: any process, or one
restarted mid-thread, sends the prompt the first would have. Under plain
``AgentState`` LangGraph drops that key and each process prunes on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired

from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import run_in_executor
from langgraph.channels.untracked_value import UntrackedValue
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.chat_agent_executor import AgentState

from ..engine import (
    STATE_KEY,
    ConfigError,
    InvalidInputError,
    Records,
    checked_records,
    keep_records,
    same_list,
    to_messages,
)
from ._callbacks import aemit, emit, usage_of
from ._clock import call_time
from ._image_archive import check_keep, offload_images
from ._results import ResultArchive, archiving

if TYPE_CHECKING:
    from ..engine import ContextGuard, PrepareResult

HookMode = Literal["llm_input", "persist"]
Update = dict[str, Any]
Writer = Callable[[Sequence[BaseMessage], list[BaseMessage]], Update]


class GuardedAgentState(AgentState):
    """``create_react_agent``'s state with an uncheckpointed ``llm_input_messages``.

    Pass it as ``state_schema`` with the default ``llm_input`` hook: the pruned
    copy reaches the model but is never written to a checkpoint, and the
    hook's handover records travel with the thread in ``context_guard``.
    """

    llm_input_messages: NotRequired[Annotated[list[AnyMessage], UntrackedValue(list)]]
    context_guard: NotRequired[list[Any]]


def _records(state: Any, size: int) -> Records:
    """The handover records kept in ``state`` (``[[index, record], ...]``).

    Those that do not fit a history of ``size`` messages (it was edited) are
    left out; anything malformed is ignored: it only costs a fresh prune.
    """
    value = state.get(STATE_KEY) if isinstance(state, dict) else None
    pairs = {
        item[0]: item[1]
        for item in (value if isinstance(value, list) else ())
        if isinstance(item, list | tuple)
        and len(item) == 2
        and isinstance(item[0], int)
    }
    return checked_records(pairs, size)


def _read(state: Any, key: str) -> list[BaseMessage]:
    value = state.get(key) if isinstance(state, dict) else getattr(state, key, None)
    if value is None:
        raise InvalidInputError(
            f"Graph state has no {key!r} messages.",
            hint="pass messages_key=... naming the state key that holds messages.",
        )
    return to_messages(value)


def rewrite(key: str) -> Writer:
    """Replace the whole ``key`` channel with the kept messages (when changed)."""

    def write(before: Sequence[BaseMessage], kept: list[BaseMessage]) -> Update:
        if same_list(before, kept):
            return {}
        return {key: [RemoveMessage(id=REMOVE_ALL_MESSAGES), *kept]}

    return write


def put(key: str) -> Writer:
    """Write the kept messages to ``key``, leaving the history alone."""
    return lambda _before, kept: {key: kept}


def _node(
    guard: ContextGuard,
    write: Writer,
    *,
    messages_key: str,
    system_prompt: str | SystemMessage | None,
    tools: Sequence[Any] | None,
    model: Any,
    source: str,
    archive: ResultArchive | None = None,
    handover: bool = False,
    keep_images: int | None = None,
    persist: bool = False,
) -> RunnableLambda[Any, Update]:
    guard = archiving(guard, archive)
    system = (
        SystemMessage(system_prompt)
        if isinstance(system_prompt, str)
        else system_prompt
    )
    head = [system] if system is not None else []
    tool_list = list(tools) if tools else None

    def finish(
        messages: list[BaseMessage], result: PrepareResult, records: list[Any] | None
    ) -> Update:
        kept = result.messages
        if head and kept and isinstance(kept[0], SystemMessage):
            kept = kept[1:]
        update = write(messages, kept)
        if records is not None:
            update[STATE_KEY] = records
        return update

    def prepare(
        state: Any, messages: list[BaseMessage], config: RunnableConfig
    ) -> tuple[PrepareResult, list[Any] | None]:
        inputs: list[BaseMessage] = [*head, *messages]
        if keep_images is not None:
            inputs = offload_images(
                inputs,
                keep_images,
                store=archive.store if archive else None,
                config=config,
                prefix=archive.namespace_prefix if archive else (),
                only_if_archived=not handover,  # what is sent is written back
            )
        records = _records(state, len(inputs)) if handover else {}
        if records:
            guard.restore_state(inputs, records, tools=tool_list, model=model)
        result = guard.prepare(
            inputs, tools=tool_list, model=model, now=call_time(guard), persist=persist
        )
        if archive is not None:
            archive.save(inputs, result.messages, config)
        if not handover:
            return result, None
        record = guard.export_state(inputs, model=model)
        kept = keep_records(records, len(inputs), record) if record else records
        return result, [[i, kept[i]] for i in sorted(kept)]

    def func(state: Any, config: RunnableConfig) -> Update:
        messages = _read(state, messages_key)
        result, records = prepare(state, messages, config)
        emit(
            result.report,
            source=source,
            config=config,
            usage=usage_of(guard, result),
        )
        return finish(messages, result, records)

    async def afunc(state: Any, config: RunnableConfig) -> Update:
        messages = _read(state, messages_key)
        result, records = await run_in_executor(
            config, prepare, state, messages, config
        )
        await aemit(
            result.report,
            source=source,
            config=config,
            usage=usage_of(guard, result),
        )
        return finish(messages, result, records)

    return RunnableLambda(func, afunc=afunc, name=f"context_guard_{source}")


def pre_model_hook(
    guard: ContextGuard,
    *,
    mode: HookMode = "llm_input",
    messages_key: str = "messages",
    system_prompt: str | SystemMessage | None = None,
    tools: Sequence[Any] | None = None,
    model: Any = None,
    archive: ResultArchive | None = None,
    keep_images: int | None = None,
) -> RunnableLambda[Any, Update]:
    """A ``pre_model_hook`` for ``langgraph.prebuilt.create_react_agent``.

    Args:
        guard: The guard to apply (one guard may serve many graphs and threads).
        mode: ``"llm_input"`` (default) returns ``llm_input_messages`` and leaves the
            history alone (with ``GuardedAgentState`` it also keeps the handover
            records in ``context_guard``); ``"persist"`` rewrites
            ``messages_key`` in the state (``prepare(persist=True)``: a person's
            newest reply stays with its answer while it fits).
        messages_key: The state key holding the history.
        system_prompt: The agent's ``prompt``, which the agent adds after this hook;
            pass it so it counts against the budget.
        tools: The tools bound to the model; their schemas count against the budget.
        model: The chat model (or name) whose context window applies.
        archive: Write the full text of every tool result the guard shortens
            to a store (``_results``); pair it with ``make_result_reader()``.
        keep_images: Send only the newest this many images whole, and each older
            image block as a pointer, archived per conversation in the graph's
            store (``archive``'s store and prefix when given); pair it with
            ``make_image_reader()``. None (default) sends every image. In
            ``"persist"`` mode an image no store holds stays whole.

    Returns:
        A runnable node, sync and async.
    """
    if mode == "llm_input":
        write = put("llm_input_messages")
    elif mode == "persist":
        write = rewrite(messages_key)
    else:
        raise ConfigError(
            f"pre_model_hook mode must be 'llm_input' or 'persist', got {mode!r}.",
            field="mode",
        )
    return _node(
        guard,
        write,
        messages_key=messages_key,
        system_prompt=system_prompt,
        tools=tools,
        model=model,
        source="pre_model_hook",
        archive=archive,
        handover=mode == "llm_input",
        keep_images=(
            None
            if keep_images is None
            else check_keep(keep_images, field="keep_images", owner="pre_model_hook")
        ),
        persist=mode == "persist",
    )


def guard_node(
    guard: ContextGuard,
    *,
    messages_key: str = "messages",
    output_key: str | None = None,
    system_prompt: str | SystemMessage | None = None,
    tools: Sequence[Any] | None = None,
    model: Any = None,
) -> RunnableLambda[Any, Update]:
    """A node for a hand-built ``StateGraph`` whose state holds a message list.

    Args:
        guard: The guard to apply.
        messages_key: The state key holding the history (any name).
        output_key: Where to write the guarded copy, leaving the history untouched.
            Without it, the node rewrites ``messages_key`` with
            ``RemoveMessage(id=REMOVE_ALL_MESSAGES)`` and the kept messages, which
            needs an ``add_messages`` reducer on that key (and prepares them as
            the stored history: ``prepare(persist=True)``).
        system_prompt: A system prompt your model node adds later, so it counts.
        tools: The tools bound to the model, counted against the budget.
        model: The chat model (or name) whose context window applies.

    Returns:
        A runnable node, sync and async.
    """
    write = rewrite(messages_key) if output_key is None else put(output_key)
    return _node(
        guard,
        write,
        messages_key=messages_key,
        system_prompt=system_prompt,
        tools=tools,
        model=model,
        source="node",
        persist=output_key is None,
    )
