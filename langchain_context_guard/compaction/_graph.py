"""Compaction in a LangGraph graph: router, node, wiring and the ``recall`` tool.

``add_compaction`` routes the edges into the model node through
``compaction_router``, which sends the state to ``compaction_node`` when a
``Compactor`` says compaction is due. The node rewrites the state with
``RemoveMessage(id=REMOVE_ALL_MESSAGES)``, or returns ``{}`` to leave it alone.
Removed messages go to the graph's store, where ``make_recall_tool`` searches them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore

from ..adapters import check_prefix, configurable, resolve_prefix
from ..engine import ConfigError
from ._archive import (
    ARCHIVE_NS,
    archive_namespace,
    archive_scope,
    format_hits,
    recall_messages,
)
from ._settings import CompactionSettings


class Compactor(Protocol):
    """What the graph pieces need of a ``Compactor`` (it satisfies this)."""

    settings: CompactionSettings
    store: BaseStore | None

    def should_compact(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = ...,
        writer: Callable[[Any], None] | None = ...,
    ) -> bool:
        """Whether ``messages`` are due for compaction."""

    def update(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = ...,
        store: BaseStore | None = ...,
        writer: Callable[[Any], None] | None = ...,
        config: RunnableConfig | None = ...,
    ) -> dict[str, Any] | None:
        """The state update that compacts ``messages``, or ``None``."""

    def aupdate(
        self,
        messages: Sequence[BaseMessage],
        *,
        thread_id: str | None = ...,
        store: BaseStore | None = ...,
        writer: Callable[[Any], None] | None = ...,
        config: RunnableConfig | None = ...,
    ) -> Awaitable[dict[str, Any] | None]:
        """Async ``update``."""


__all__ = [
    "ARCHIVE_NS",
    "add_compaction",
    "archive_namespace",
    "compaction_node",
    "compaction_router",
    "make_recall_tool",
    "recall_messages",
]


def compaction_router(
    compactor: Compactor, next_node: str, *, compact_node: str = "compact"
) -> Callable[..., str]:
    """A conditional edge: ``compact_node`` when due, else ``next_node``."""

    def route(state: Any, config: RunnableConfig) -> str:
        messages = _state_messages(state, compactor.settings.messages_key)
        due = compactor.should_compact(
            messages, thread_id=_thread_id(config), writer=_graph_writer()
        )
        return compact_node if due else next_node

    return route


def compaction_node(
    compactor: Compactor, name: str = "compact"
) -> Runnable[Any, dict[str, Any]]:
    """The graph node: returns the rewrite, or ``{}`` to leave state alone."""

    def compact_node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state, compactor.settings.messages_key)
        update = compactor.update(
            messages,
            thread_id=_thread_id(config),
            store=compactor.store or _graph_store(),
            writer=_graph_writer(),
            config=config,
        )
        return update or {}

    async def acompact_node(state: Any, config: RunnableConfig) -> dict[str, Any]:
        messages = _state_messages(state, compactor.settings.messages_key)
        update = await compactor.aupdate(
            messages,
            thread_id=_thread_id(config),
            store=compactor.store or _graph_store(),
            writer=_graph_writer(),
            config=config,
        )
        return update or {}

    return RunnableLambda(compact_node, afunc=acompact_node, name=name)


def add_compaction(
    builder: Any, *, before: str, compactor: Compactor, name: str = "compact"
) -> Any:
    """Route every plain edge into ``before`` through the compaction router.

    Call it after adding the edges that lead to ``before`` (usually ``START`` and
    the tools node into the model node). Adds node ``name`` and the edge
    ``name -> before``; returns the builder.
    """
    sources = sorted(s for s, e in builder.edges if e == before)
    if not sources:
        raise ConfigError(
            f"No edge leads to node {before!r} yet.",
            field="before",
            hint="add the edges into that node first, then call add_compaction.",
        )
    builder.add_node(name, compaction_node(compactor, name))
    route = compaction_router(compactor, before, compact_node=name)
    for source in sources:
        builder.edges.discard((source, before))
        builder.add_conditional_edges(source, route, [name, before])
    builder.add_edge(name, before)
    return builder


def make_recall_tool(
    store: BaseStore | None = None,
    *,
    limit: int = 5,
    name: str = "recall",
    namespace_prefix: tuple[str, ...] = (),
) -> BaseTool:
    """A tool the agent can call to search messages that compaction removed.

    Without ``store``, the graph's store (``compile(store=...)``) is used;
    ``namespace_prefix`` as in the ``CompactionSettings`` that archived them.
    It reads the calling conversation's archive only.
    """
    prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def recall(query: str, config: RunnableConfig) -> str:
        target = store or _graph_store()
        if target is None:
            return "No archive is configured for this conversation."
        values = configurable(config)
        thread = _thread_id(config)
        _, why = archive_scope(prefix, thread, values)
        labels = resolve_prefix(prefix, values)
        if why or labels is None:
            return f"No archive for this conversation: {why}."
        hits = recall_messages(
            target, query, thread_id=thread, limit=limit, namespace_prefix=labels
        )
        return format_hits(query, hits)

    return StructuredTool.from_function(
        recall,
        name=name,
        description="Search earlier messages of this conversation that were "
        "removed from the context by compaction (exact old tool outputs, file "
        "contents, errors). Input: words to look for.",
    )


def _state_messages(state: Any, key: str) -> list[BaseMessage]:
    value = state.get(key) if isinstance(state, dict) else getattr(state, key, None)
    return list(value or [])


def _thread_id(config: RunnableConfig | None) -> str | None:
    value = ((config or {}).get("configurable") or {}).get("thread_id")
    return None if value is None else str(value)


def _graph_store() -> BaseStore | None:
    from langgraph.config import get_store

    try:
        return get_store()
    except (RuntimeError, KeyError, AttributeError):
        return None


def _graph_writer() -> Callable[[Any], None] | None:
    from langgraph.config import get_stream_writer

    try:
        return get_stream_writer()
    except (RuntimeError, KeyError, AttributeError):
        return None
