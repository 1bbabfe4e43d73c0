"""Nothing lost: the full text of tool results the guard cut, kept in a store.

The truncation and compression passes shorten tool results to fit the window.
With a ``ResultArchive`` on an adapter (``ContextGuardMiddleware(archive=...)``,
``pre_model_hook(archive=...)``), the adapter compares what it gave the guard
with what the guard returned, by ``tool_call_id``, and writes the full text of
every result that came back shorter, or not at all (its turn trimmed), to a
LangGraph store: namespace
``(*namespace_prefix, "context_guard", "tool_results", <thread_id>)`` (labels
encoded by ``_namespace``, so any thread id works), key the tool call id, value
the text and its SHA-256. Without a thread id nothing is archived (a warning is
logged): no two conversations ever share a namespace. A result already there
with the same digest is not written again (retries and the same prompt re-sent
write nothing), so the engine stays pure and the cost is one store read per
newly cut result.

``make_result_reader`` gives the agent a ``read_tool_result`` tool, paged by
lines or characters (``PAGE_CHARS`` at most a page); ``make_result_search``
(``_result_search``) one that searches them by pattern. An adapter with an
archive runs its guard with its policy ``with_archive()`` (``archiving``:
``archived_results=True`` and the ``ARCHIVE_DEFAULTS`` the policy leaves
unset): the marker in a cut result then says how much was cut and names
its short key, e.g. ``full text: read_tool_result("#12")``, and the digest of
trimmed turns (on there by default) names each call's result by its key and
all of them in one line of ranges (``#1-#140``, ``engine._result_keys``): the
archive numbers the results it saves the same way and keeps each key with its
call id in a namespace of its own beside the results' (``KEYS``), so both tools
take a key where they take a call id. The marker is part of the text the guard
counts (truncation fits it inside ``max_tool_result_chars``), so budgets stay
exact; without an archive the markers are as before.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore, Item

from ..engine import (
    TURN,
    ConfigError,
    ContextGuard,
    parse_result_key,
    result_key,
    result_ordinals,
    turn_key,
)
from ._cut import cut_before, cut_results
from ._namespace import (
    check_prefix,
    configurable,
    resolve_prefix,
    scoped,
    thread_of,
    why_unscoped,
)

NAMESPACE = ("context_guard", "tool_results")
KEYS = "tool_result_keys"
"""The label of the namespace that maps a conversation's result keys (``#12``,
``engine._result_keys``) to tool call ids, beside ``NAMESPACE``."""
_SEEN_MEMORY = 65_536
PAGE_CHARS = 20_000
"""Characters of one page the ``read_tool_result`` tool returns, at most."""
logger = logging.getLogger("langchain_context_guard")


def archiving(guard: ContextGuard, archive: ResultArchive | None) -> ContextGuard:
    """The guard an adapter with ``archive`` runs: markers name the result's key.

    ``guard`` itself when there is no archive or its policy already says so;
    else a guard with its policy ``with_archive`` (``archived_results`` and the
    ``ARCHIVE_DEFAULTS`` it does not set) and the same counter.
    """
    if archive is None or guard.policy.archived_results:
        return guard
    policy = guard.policy.with_archive()
    return ContextGuard(policy, token_counter=guard.counter, model=guard.model)


def result_namespace(thread_id: str, *, prefix: Sequence[str] = ()) -> tuple[str, ...]:
    """The store namespace of one thread's archived tool results."""
    return scoped(prefix, NAMESPACE[1:], thread_id)


def keys_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    """Where the result keys of the conversation archived at ``namespace`` are."""
    return (*namespace[:-2], KEYS, namespace[-1])


def resolve_key(store: BaseStore, namespace: tuple[str, ...], key: str) -> str:
    """The tool call id a result key (``#12``) stands for; other keys as given.

    A turn's key (``#12@turn``) stands for the ``turn_key`` of that call id.
    Read from the conversation's own key namespace; a value that is not a
    call id is ignored.
    """
    turn = key.strip().endswith(TURN)
    base = _call_of(key.strip())
    if parse_result_key(base) is None:
        return key
    call_id = _field(store.get(keys_namespace(namespace), base), "tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        return key
    return turn_key(call_id) if turn else call_id


def _call_of(key: str) -> str:
    """The tool call id an archived item's key belongs to (a turn's: its call)."""
    return key.removesuffix(TURN)


def _field(item: Item | None, name: str) -> Any:
    """``item.value[name]``; None when the item, or a dict value, is not there."""
    value = item.value if item is not None else None
    return value.get(name) if isinstance(value, dict) else None


def scope(
    prefix: Sequence[str], config: RunnableConfig | None
) -> tuple[tuple[str, ...] | None, str]:
    """The conversation's namespace, or None and why there is none."""
    values = configurable(config)
    thread = thread_of(config)
    labels = resolve_prefix(prefix, values)
    if thread is None or labels is None:
        return None, why_unscoped(thread, prefix, values)
    return result_namespace(thread, prefix=labels), ""


@dataclass
class ResultArchive:
    """Where the full text of cut tool results goes.

    Args:
        store: The store to write to; None uses the graph's store
            (``compile(store=...)``, ``create_agent(store=...)``).
        ttl_minutes: Time to live of each archived result, for stores that
            support TTL (``PostgresStore``, ``SqliteStore``, ``InMemoryStore``
            with a TTL config); None keeps them.
        max_chars: Archive at most this many characters of one result (its head);
            None archives all of it.
        namespace_prefix: Labels before the archive's own, e.g. ``("tenants",
            "{user_id}")``: a label written ``{key}`` is filled from
            ``config["configurable"][key]``. Give ``make_result_reader`` the same.
    """

    store: BaseStore | None = None
    ttl_minutes: float | None = None
    max_chars: int | None = None
    namespace_prefix: tuple[str, ...] = ()
    _seen: OrderedDict[tuple[str, str, str], None] = field(
        default_factory=OrderedDict, repr=False
    )
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.max_chars is not None and self.max_chars <= 0:
            raise ConfigError(
                f"ResultArchive max_chars must be positive, got {self.max_chars}.",
                field="max_chars",
            )
        self.namespace_prefix = check_prefix(
            self.namespace_prefix, field="namespace_prefix"
        )

    def target(self) -> BaseStore | None:
        """The configured store, else the running graph's."""
        if self.store is not None:
            return self.store
        from langgraph.config import get_store

        try:
            return get_store()
        except (RuntimeError, KeyError, AttributeError):
            return None

    def save(
        self,
        before: Sequence[BaseMessage],
        after: Sequence[BaseMessage],
        config: RunnableConfig | None,
    ) -> int:
        """Archive the results ``after`` holds shorter than ``before``; count saved."""
        cut = cut_results(before, after)
        marked = cut_before(before)
        if not cut and not marked:
            return 0
        store = self.target()
        if store is None:
            return 0
        if self.ttl_minutes is not None and not store.supports_ttl:
            raise ConfigError(
                f"ResultArchive(ttl_minutes={self.ttl_minutes}) needs a store with "
                f"TTL support; {type(store).__name__} has none. Use PostgresStore "
                "or SqliteStore, or drop ttl_minutes (max_chars caps the size).",
                field="ttl_minutes",
            )
        namespace, why = scope(self.namespace_prefix, config)
        if namespace is None:
            logger.warning(
                "Context guard: %d shortened tool result(s) not archived: %s.",
                len(cut),
                why,
            )
            return 0
        written = 0
        places = result_ordinals(before)
        for item in marked:  # cut in a history since rewritten: its key moved
            self._name_once(store, namespace, places.get(_call_of(item)), item)
        for item, text in cut.items():
            if self.max_chars is not None:
                text = text[: self.max_chars]
            place = places.get(_call_of(item))
            key = "" if place is None else result_key(place)
            # in this process, the text's own hash (cached on a result's text)
            # tells a text seen before: the digest is for the store's copy
            seen = (".".join(namespace), item, f"{len(text)}:{hash(text)}{key}")
            with self._lock:
                if seen in self._seen:
                    continue
            digest = hashlib.sha256(text.encode()).hexdigest()
            old = store.get(namespace, item)
            if _field(old, "sha256") != digest:
                self._put(
                    store,
                    namespace,
                    item,
                    {"text": text, "sha256": digest, "chars": len(text)},
                )
                written += 1
            if key:
                self._name(store, namespace, key, _call_of(item))
            with self._lock:
                self._seen[seen] = None
                while len(self._seen) > _SEEN_MEMORY:
                    self._seen.popitem(last=False)
        return written

    def _put(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        key: str,
        value: dict[str, Any],
    ) -> None:
        if self.ttl_minutes is None:
            store.put(namespace, key, value)
        else:
            store.put(namespace, key, value, ttl=self.ttl_minutes)

    def _name_once(
        self,
        store: BaseStore,
        namespace: tuple[str, ...],
        place: int | None,
        item: str,
    ) -> None:
        """``_name`` once per key and item (remembered), if both are there."""
        if place is None or store.get(namespace, item) is None:
            return
        seen = (".".join(namespace), item, result_key(place))
        with self._lock:
            if seen in self._seen:
                return
        self._name(store, namespace, result_key(place), _call_of(item))
        with self._lock:
            self._seen[seen] = None

    def _name(
        self, store: BaseStore, namespace: tuple[str, ...], key: str, call_id: str
    ) -> None:
        """Store ``key`` for ``call_id``, unless it already stands for it."""
        where = keys_namespace(namespace)
        old = store.get(where, key)
        if _field(old, "tool_call_id") != call_id:
            self._put(store, where, key, {"tool_call_id": call_id})


def read_result(
    store: BaseStore,
    thread_id: str | None,
    tool_call_id: str,
    *,
    offset: int = 0,
    limit: int = 200,
    unit: Literal["lines", "chars"] = "lines",
    namespace_prefix: Sequence[str] = (),
) -> str:
    """One page of an archived result, with where it is in the whole.

    ``namespace_prefix`` holds the labels themselves (no ``{key}`` left).
    """
    if thread_id is None:
        return (
            "No result archive for this conversation: it has no thread_id "
            "(results are archived per conversation)."
        )
    namespace = result_namespace(thread_id, prefix=namespace_prefix)
    return _page(store, namespace, tool_call_id, offset, limit, unit, None)


def _page(
    store: BaseStore,
    namespace: tuple[str, ...],
    tool_call_id: str,
    offset: int,
    limit: int,
    unit: Literal["lines", "chars"],
    max_chars: int | None,
) -> str:
    """One page; with ``max_chars``, at most that many characters of text."""
    item = store.get(namespace, resolve_key(store, namespace, tool_call_id))
    if item is None:
        return (
            f"No archived result for tool_call_id {tool_call_id!r} in this "
            "conversation (only what the context guard shortened or removed is "
            "archived)."
        )
    text = str(item.value.get("text", ""))
    offset, limit = max(offset, 0), max(limit, 1)
    cap = max_chars or len(text) + 1
    if unit == "chars":
        page = text[offset : offset + min(limit, cap)]
        end = offset + len(page)
        return f"[characters {offset}-{end} of {len(text)}]\n{page}"
    lines = text.split("\n")
    page_lines = lines[offset : offset + limit]
    size = 0
    for k, line in enumerate(page_lines):
        size += len(line) + 1
        if size > cap and k > 0:
            page_lines = page_lines[:k]
            break
    end = offset + len(page_lines)
    head = f"[lines {offset}-{end} of {len(lines)}]"
    body = "\n".join(page_lines)
    if len(body) > cap:  # one huge line: read the rest by characters
        body = body[:cap]
        head = f"[lines {offset}-{end} of {len(lines)}; cut at {cap:,} chars]"
    if end < offset + limit and end < len(lines):
        head = head[:-1] + f"; more from offset={end}]"
    return f"{head}\n{body}"


def make_result_reader(
    store: BaseStore | None = None,
    *,
    name: str = "read_tool_result",
    namespace_prefix: tuple[str, ...] = (),
) -> BaseTool:
    """The ``read_tool_result`` tool: read back a result the guard shortened.

    Without ``store``, the graph's store is used; ``namespace_prefix`` as in
    the ``ResultArchive`` that wrote the results.
    """
    prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def read(
        tool_call_id: str,
        config: RunnableConfig,
        offset: int = 0,
        limit: int = 200,
        unit: Literal["lines", "chars"] = "lines",
    ) -> str:
        target = ResultArchive(store).target()
        if target is None:
            return "No result archive is configured for this conversation."
        namespace, why = scope(prefix, config)
        if namespace is None:
            return f"No result archive for this conversation: {why}."
        return _page(target, namespace, tool_call_id, offset, limit, unit, PAGE_CHARS)

    return StructuredTool.from_function(
        read,
        name=name,
        description="Read the full text of an earlier tool result that the context "
        "guard truncated, compressed or removed (its marker or the context note "
        "names its tool_call_id or its key, such as #12). Give the result's "
        "tool_call_id or key; add @turn (#12@turn) for the assistant turn that "
        "made the call, its words and calls in full. Page with offset and limit, "
        "in lines (default) or chars (a page holds at most 20,000 characters). "
        "search_tool_results finds lines by pattern.",
    )
