"""Search the archived tool results of one conversation by regular expression.

``make_result_search`` gives the agent a ``search_tool_results`` tool: a pattern
searched line by line in one archived result (``tool_call_id``) or in every
result the ``ResultArchive`` kept for this conversation, each match shown with
its context lines and its line number (the ``offset`` with which
``read_tool_result`` reads on from there). Outputs are bounded: at most
``max_matches`` matches, each line cut to ``_LINE_CHARS``, the lines shown to
``_OUTPUT_CHARS``, with a last line saying what was left out. The search reads
the conversation's own namespace and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.store.base import BaseStore, Item

from ._namespace import check_prefix
from ._results import ResultArchive, resolve_key, scope

_LINE_CHARS = 300
"""Characters of one shown line; the rest is elided."""
_OUTPUT_CHARS = 8_000
"""Characters of one search's output, at most (its notes aside)."""
_PATTERN_CHARS = 500
_PAGE = 100
"""Items read from the store at a time when searching the whole archive."""


class Hit(NamedTuple):
    """One archived result's matching lines: its key and line numbers."""

    key: str
    lines: list[str]
    matched: list[int]


def _items(
    store: BaseStore, namespace: tuple[str, ...], tool_call_id: str | None
) -> Iterator[Item]:
    """The archived results searched: one, or all of this namespace's, oldest first."""
    if tool_call_id is not None:
        item = store.get(namespace, resolve_key(store, namespace, tool_call_id))
        if item is not None:
            yield item
        return
    found: list[Item] = []
    offset = 0
    while True:
        page = store.search(namespace, limit=_PAGE, offset=offset)
        found += [i for i in page if tuple(i.namespace) == namespace]
        if len(page) < _PAGE:
            break
        offset += _PAGE
    yield from sorted(found, key=lambda i: (i.created_at, i.key))


def _show(number: int, line: str, matched: bool) -> str:
    if len(line) > _LINE_CHARS:
        line = f"{line[:_LINE_CHARS]} ...[{len(line) - _LINE_CHARS:,} chars]"
    return f"{number}{':' if matched else '-'} {line}"


def _block(hit: Hit, context: int) -> list[str]:
    """The lines shown for one result: each match with ``context`` lines around."""
    shown: list[str] = [f"--- {hit.key} ({len(hit.lines):,} lines) ---"]
    matched = set(hit.matched)
    last = -1
    for i in hit.matched:
        start, end = max(i - context, last + 1), min(i + context + 1, len(hit.lines))
        if start > last + 1 and last >= 0:
            shown.append("...")
        shown += [_show(k, hit.lines[k], k in matched) for k in range(start, end)]
        last = max(last, end - 1)
    return shown


def search_archive(
    store: BaseStore,
    namespace: tuple[str, ...],
    pattern: str,
    *,
    tool_call_id: str | None = None,
    context: int = 2,
    max_matches: int = 20,
) -> str:
    """Lines of archived results that match ``pattern``, with context, bounded."""
    if len(pattern) > _PATTERN_CHARS:
        return f"The pattern is too long ({len(pattern):,} > {_PATTERN_CHARS})."
    try:
        regex = re.compile(pattern)
    except re.error as error:
        return f"Invalid regular expression {pattern!r}: {error}. Fix the pattern."
    context = min(max(context, 0), 20)
    max_matches = min(max(max_matches, 1), 200)
    out: list[str] = []
    size = total = searched = 0
    cut = False
    for item in _items(store, namespace, tool_call_id):
        searched += 1
        lines = str(item.value.get("text", "")).split("\n")
        matched = [k for k, line in enumerate(lines) if regex.search(line)]
        total += len(matched)
        room = max_matches - (total - len(matched))
        if not matched or room <= 0 or cut:
            cut = cut or bool(matched)
            continue
        for line in _block(Hit(item.key, lines, matched[:room]), context):
            size += len(line) + 1
            if size > _OUTPUT_CHARS:
                cut = True
                break
            out.append(line)
        cut = cut or len(matched) > room
    if searched == 0:
        where = f"tool_call_id {tool_call_id!r}" if tool_call_id else "anything"
        return (
            f"No archived result for {where} in this conversation (only results "
            "the context guard shortened or removed are archived)."
        )
    if total == 0:
        return f"No line matches {pattern!r} in {searched} archived result(s)."
    head = (
        f"[{total} matching line(s) in {searched} archived result(s); the number "
        "before each line is the offset read_tool_result reads from]"
    )
    tail = (
        ["[more matches left out: narrow the pattern or give a tool_call_id]"]
        if cut
        else []
    )
    return "\n".join([head, *out, *tail])


def make_result_search(
    store: BaseStore | None = None,
    *,
    name: str = "search_tool_results",
    namespace_prefix: tuple[str, ...] = (),
) -> BaseTool:
    """The ``search_tool_results`` tool: find lines in the archived results.

    Without ``store``, the graph's store is used; ``namespace_prefix`` as in
    the ``ResultArchive`` that wrote the results.
    """
    prefix = check_prefix(namespace_prefix, field="namespace_prefix")

    def search(
        pattern: str,
        config: RunnableConfig,
        tool_call_id: str | None = None,
        context: int = 2,
        max_matches: int = 20,
    ) -> str:
        target = ResultArchive(store).target()
        if target is None:
            return "No result archive is configured for this conversation."
        namespace, why = scope(prefix, config)
        if namespace is None:
            return f"No result archive for this conversation: {why}."
        return search_archive(
            target,
            namespace,
            pattern,
            tool_call_id=tool_call_id,
            context=context,
            max_matches=max_matches,
        )

    return StructuredTool.from_function(
        search,
        name=name,
        description="Search earlier tool results that the context guard shortened "
        "or removed from the conversation, by a Python regular expression matched "
        "line by line. Give tool_call_id (or a key such as #12 from the context "
        "note) to search one result, or leave it out to "
        "search them all; each match comes with `context` lines around it and its "
        "line number (read on from there with read_tool_result's offset).",
    )
