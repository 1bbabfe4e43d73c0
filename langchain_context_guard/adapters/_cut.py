"""What the guard cut from a history: the originals a ``ResultArchive`` keeps.

The adapter compares the messages it gave the guard (``before``) with those the
guard returned (``after``): a tool result sent shorter or not at all, a call
argument sent shorter (``compress_call_args``), an assistant turn whose words
were cut or which was trimmed. Each is keyed as the archive stores it: the
tool call id, ``args_key`` (``<call id>:<name>``), ``turn_key``
(``<call id>@turn``). What the guard cut in an earlier call and the history
kept (persist mode) is archived already: ``cut_before`` names it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ..engine import args_key, marker, text_of, turn_key

_CUT = frozenset({"truncated", "compressed", "superseded", "cleared"})
"""Marker kinds of messages the guard cut, their originals archived then."""


def cut_results(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage]
) -> dict[str, str]:
    """Full text of each tool result that ``after`` holds shorter than ``before``.

    A result ``after`` no longer holds at all (its turn trimmed) counts too;
    one the guard cut before (``cut_before``) never: its original is archived.
    Each call argument ``after`` sends shorter (``compress_call_args``) counts
    under its own key (``args_key``: ``<call id>:<name>``), and each assistant
    turn whose text ``after`` cuts, or which it trims, under its calls' turn
    keys (``_cut_turns``).
    """
    sent = {
        m.tool_call_id: m
        for m in after
        if isinstance(m, ToolMessage) and m.tool_call_id
    }
    out: dict[str, str] = {}
    for message in before:
        if not isinstance(message, ToolMessage) or _cut_by_guard(message):
            continue
        new = sent.get(message.tool_call_id)
        if new is message or (new is not None and new.content is message.content):
            continue
        full = text_of(message.content)
        if len(text_of(new.content) if new is not None else "") < len(full):
            out[message.tool_call_id] = full
    return out | _cut_args(before, after) | _cut_turns(before, after)


def _cut_args(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage]
) -> dict[str, str]:
    """Full text of each call argument ``after`` sends shorter, by ``args_key``."""
    sent = {
        c["id"]: c["args"]
        for m in after
        if isinstance(m, AIMessage) and marker(m) is not None
        for c in m.tool_calls
        if c.get("id")
    }
    out: dict[str, str] = {}
    if not sent:
        return out
    for message in before:
        if not isinstance(message, AIMessage) or _cut_by_guard(message):
            continue
        for call in message.tool_calls:
            now = sent.get(call.get("id") or "")
            if now is None or now is call["args"]:
                continue
            for name, value in call["args"].items():
                new = now.get(name)
                if isinstance(value, str) and isinstance(new, str):
                    if len(new) < len(value):
                        out[args_key(str(call["id"]), name)] = value
    return out


def _cut_turns(
    before: Sequence[BaseMessage], after: Sequence[BaseMessage]
) -> dict[str, str]:
    """Each assistant turn ``after`` sends with its text cut, or not at all.

    Its words and its calls in full (``turn_text``), under the ``turn_key`` of
    each of its ``_turn_refs``. A turn the guard cut before never: it is archived.
    """
    sent = {ref: m for m in after if isinstance(m, AIMessage) for ref in _turn_refs(m)}
    out: dict[str, str] = {}
    for message in before:
        if not isinstance(message, AIMessage) or _cut_by_guard(message):
            continue
        refs = _turn_refs(message)
        new = sent.get(refs[0]) if refs else message
        if new is message:
            continue
        if new is not None and not (
            _cut_by_guard(new)
            and len(text_of(new.content)) < len(text_of(message.content))
        ):
            continue
        text = turn_text(message)
        if text:
            out.update({turn_key(ref): text for ref in refs})
    return out


def _turn_refs(message: AIMessage) -> list[str]:
    """What a turn is archived under: its call ids, else its own id (if any)."""
    ids = [str(c["id"]) for c in message.tool_calls if c.get("id")]
    return ids or ([message.id] if message.id else [])


def turn_text(message: AIMessage) -> str:
    """An assistant turn as the archive keeps it: its words, then each call."""
    words = text_of(message.content)
    calls = [
        f"[tool call {c['name']} (id {c.get('id')}), arguments:] "
        + json.dumps(c["args"], ensure_ascii=False)
        for c in message.tool_calls
    ]
    return "\n".join([words, *calls] if words else calls)


def cut_before(before: Sequence[BaseMessage]) -> list[str]:
    """What in ``before`` the guard already cut (persist mode), by archive key.

    A result by its call id, an assistant turn by its first ``_turn_refs``'
    turn key.
    """
    out: list[str] = []
    for m in before:
        if not _cut_by_guard(m):
            continue
        if isinstance(m, ToolMessage) and m.tool_call_id:
            out.append(m.tool_call_id)
        elif isinstance(m, AIMessage) and (refs := _turn_refs(m)):
            out.append(turn_key(refs[0]))
    return out


def _cut_by_guard(message: BaseMessage) -> bool:
    mark = marker(message)
    return mark is not None and mark.get("kind") in _CUT
