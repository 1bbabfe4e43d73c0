"""Superseded reads: an older result of a call made again, replaced by a pointer.

An agent reads the same file, or runs the same test script, again after a
change; the older result then only tells what the newer one says better. With
``ToolPolicy.supersede_key`` set for a tool, two of its calls with the same value
of that argument read the same resource, and the older result becomes a short
pointer to the newer call (with the size it had). The compression pass makes the
change, so it comes at pruning time only and never breaks a pair: the result
keeps its tool call id. The newest read of a resource always stays. When the
full text is archived (``GuardPolicy.archived_results``), the pointer also names
the way back to the older read itself: ``read_tool_result("#12")``, its key
(``_result_keys``), or its call id where no key is known.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._messages import kept_whole, marker, memo_rewrite, original_size, text_of
from .._messages import with_marker as _with_marker
from .._result_keys import Naming, pointer
from .._tool_policy import Written, key_names, tool_name
from ._text import where

SUPERSEDED = "superseded"
"""The marker kind of a result replaced by a pointer to a newer read."""


def superseded_reads(
    messages: Sequence[BaseMessage],
    keys: Mapping[str, str | tuple[str, ...] | Written],
    keep_whole: Collection[str] = frozenset(),
) -> dict[int, str]:
    """Index of each superseded result -> the tool call id of the next same read.

    ``keys``: per tool name, the argument that names what a call reads
    (``_tool_policy.supersede_keys``), or several (the first required). A
    result is superseded when a later result answers a call of the same tool
    with the same values of those arguments; it points to the next such call (a
    pointer never changes as more reads come). Results already marked
    superseded keep their pointer; results of ``keep_whole`` tools and results
    marked ``kept_whole`` never are; a synthetic result (a call not answered
    yet) reads nothing, and a failed one (``status="error"``) supersedes nothing.
    A successful call of a writing tool (``Written``: ``ToolPolicy.write_key``)
    outdates the latest read of each range of what it wrote: those point to it.
    """
    out: dict[int, str] = {}
    if not keys:
        return out
    reads: dict[str, tuple[str, str]] = {}  # call id -> (tool, key value)
    writes: dict[str, str] = {}  # call id -> what it writes
    last: dict[tuple[str, str], int] = {}  # resource -> its latest result
    first: dict[tuple[str, str], str] = {}  # resource -> its first key's value
    for i, m in enumerate(messages):
        if isinstance(m, AIMessage):
            _note_calls(m, keys, reads, writes, first)
            continue
        if not isinstance(m, ToolMessage):
            continue
        mark = marker(m)
        kind = None if mark is None else mark.get("kind")
        if kind == SUPERSEDED:
            out[i] = str(mark.get("newer", "")) if mark is not None else ""
            continue
        if kind == "synthetic_result":
            continue  # its call is not answered yet: nothing read again
        written = writes.get(m.tool_call_id)
        if written is not None:
            if m.status != "error":  # a failed write changed nothing
                _outdate(last, first, written, m.tool_call_id, out)
            continue
        read = reads.get(m.tool_call_id)
        if read is None or kept_whole(m) or tool_name(m) in keep_whole:
            continue
        if m.status == "error":
            continue  # a failed read tells nothing newer than a good one
        older = last.get(read)
        if older is not None:
            out[older] = m.tool_call_id
        last[read] = i
    return out


def _note_calls(
    message: AIMessage,
    keys: Mapping[str, str | tuple[str, ...] | Written],
    reads: dict[str, tuple[str, str]],
    writes: dict[str, str],
    first: dict[tuple[str, str], str],
) -> None:
    """What each of ``message``'s calls reads or writes, by call id."""
    for call in message.tool_calls:
        rule, args, call_id = keys.get(call["name"]), call["args"], call["id"]
        if not call_id:
            continue
        if isinstance(rule, Written):
            if rule.key in args:
                writes[call_id] = _value(args[rule.key])
            continue
        names = key_names(rule)
        if names and names[0] in args:
            read = (call["name"], _read(args, names))
            reads[call_id] = read
            first[read] = _value(args[names[0]])


def _outdate(
    last: dict[tuple[str, str], int],
    first: Mapping[tuple[str, str], str],
    written: str,
    write: str,
    out: dict[int, str],
) -> None:
    """The latest reads of what ``write`` wrote now point to it, and are let go."""
    for resource in [r for r in last if first[r] == written]:
        out[last.pop(resource)] = write


def _read(args: Mapping[str, object], names: tuple[str, ...]) -> str:
    """What a call reads: its key argument's value, or all of its key arguments'."""
    if len(names) == 1:
        return _value(args[names[0]])
    return json.dumps([_value(args.get(n)) for n in names])


def _value(value: object) -> str:
    """An argument's value as text, equal for equal values."""
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, sort_keys=True, default=repr)


def supersede_message(
    message: BaseMessage, newer: str, *, name_source: Naming = False
) -> BaseMessage:
    """``message`` as a pointer to the tool call ``newer`` (memoised).

    ``name_source``: the pointer also names the message's own tool call id, or
    its key (``_result_keys.Naming``), to read its full text back (archived).
    Unchanged when it is marked already, or the pointer would not be shorter.
    """
    mark = marker(message)
    if mark is not None and mark.get("kind") in {SUPERSEDED, "kept_whole"}:
        return message
    source = pointer(message, name_source)  # a key is a place in one history
    return memo_rewrite(
        message,
        (SUPERSEDED, newer, source),
        lambda m: _pointer(m, newer, source),
    )


def _pointer(message: BaseMessage, newer: str, source: str | None) -> BaseMessage:
    text = text_of(message.content)
    chars, lines = original_size(message, text)
    tool = message if isinstance(message, ToolMessage) else None
    name = tool.name if tool is not None and tool.name else None
    what = f"{name} result" if name else "tool result"
    short = (
        f"[superseded {what}: the same call was made again, or what it read was "
        f"written, later (tool call {newer} holds the fresh result); {chars:,} "
        f"characters, {lines:,} lines "
        f"omitted by context guard{where(source)}]"
    )
    if len(short) >= len(text) and isinstance(message.content, str):
        return message
    return _with_marker(
        message,
        SUPERSEDED,
        content=short,
        original_chars=chars,
        original_lines=lines,
        newer=newer,
    )
