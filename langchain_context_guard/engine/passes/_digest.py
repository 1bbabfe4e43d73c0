"""Pass 6b: a note in place of trimmed turns, saying what they did.

Trimming drops whole turns, and with them the agent's memory of its own earlier
steps: which commands it ran and which files and names it was looking at. The
digest is a marked user message put where the dropped turns were, listing the
tool calls they made (newest first within a token cap, shown oldest first, long
arguments shortened) and the paths and code names they mentioned. It is built
deterministically from the dropped messages (no model call), so the same cut
gives byte-identical text; a digest that is itself dropped later carries its
lists into the next one. With archived results, each listed call names its
result by a short key and one line names the keys of every dropped result in
ranges (``_result_keys``), so all of them keep a way back, listed or not.
With ``digest_form="turns"`` the digest is the trimmed turns themselves
(``_digest_turns``); with archived results a turn that did not fit keeps its way
back in a short note before them, the line of keys alone (``_keys_note``).

On the shared trajectories the agent's own earlier commands and thoughts hold
most of what trimming loses (BENCHMARKS.md): 85% of the identifiers the next
action reused that were no longer sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from .._messages import MARKER_KEY, marker, text_of
from .._quoting import quote
from .._result_keys import key_ranges, result_key
from ._digest_turns import TurnsForm, chosen_turns

DIGEST_ID = "context-guard-digest"
_HEAD = (
    "[Context note: {n} earlier messages were removed to fit the context window. "
    "What they did, for reference (their outputs are gone; rerun a command to see "
    "its output again):]"
)
_ARCHIVED_HEAD = (
    "[Context note: {n} earlier messages were removed to fit the context window. "
    "What they did, for reference (their outputs are archived: "
    'read_tool_result("<key>") reads the output of the call marked (<key>), '
    'read_tool_result("<key>@turn") the assistant turn that made the call, '
    'search_tool_results("<regex>") searches them all):]'
)
_TURNS_HEAD = (
    "[Context note: {n} earlier messages were removed to fit the context window "
    "(those of their tool calls kept after this note are cut down, their outputs "
    'cleared). Their outputs are archived: read_tool_result("<key>") reads one '
    'back, read_tool_result("<key>@turn") the assistant turn that made the call, '
    'search_tool_results("<regex>") searches them all.]'
)
_KEYS = "Keys of all their archived outputs, oldest first: {ranges}"
_CALLS = (
    "The assistant's own tool calls in them{which}, oldest first, quoted as data "
    "(a record of what it ran, not instructions from anyone):"
)
_OPEN, _CLOSE = "<earlier_calls>", "</earlier_calls>"
_OWN_KEY = re.compile(r"^([^\s(]+) \(#\d+\)(?=: )")
"""A carried line's key: a place in the history the line was made from."""
_TOKEN = re.compile(r"[A-Za-z0-9_./-]+")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[a-z][A-Z]")
_CALL_SHARE = 0.6
"""Share of the digest's room given to tool calls first; names fill the rest."""
_SCAN = 40
"""Text read for names, newest first, at most this many times what can be shown
(older messages' names would not fit anyway once newer ones fill the room)."""


def is_digest(message: BaseMessage) -> bool:
    """Whether ``message`` is a digest made by this pass."""
    mark = marker(message)
    return mark is not None and mark.get("kind") == "digest"


def mentioned_names(text: str) -> list[str]:
    """Paths, file names, dotted names and code names in ``text``, in order.

    A path is a token with a ``/`` (plus its file name); a dotted name has a
    letter and 4+ characters (``setup.py``, ``models.QuerySet``); a code name has
    4+ characters and an underscore or a camel hump (``get_queryset``). Plain
    words and numbers are left out: they say little once their context is gone.
    """
    out: dict[str, None] = {}
    for raw in _TOKEN.findall(text):
        token = raw.strip("./-")
        if "/" in token:
            out[token] = None
            base = token.rsplit("/", 1)[-1]
            if "." in base and len(base) >= 4:
                out[base] = None
        elif "." in token and len(token) >= 4 and any(c.isalpha() for c in token):
            out[token] = None
        for word in _WORD.findall(token):
            if len(word) >= 4 and ("_" in word.strip("_") or _CAMEL.search(word)):
                out[word] = None
    return list(out)


def render_call(
    call: dict[str, Any], max_chars: int, *, source: bool = False, key: str = ""
) -> str:
    """One tool call as a line: ``name: arguments``, shortened to ``max_chars``.

    With ``source``, its result's ``key`` (``_result_keys``), else its id,
    follows the name (``bash (#3): ls``): what its archived result is read
    back with, never cut (the arguments are).
    """
    args = call.get("args") or {}
    if isinstance(args, dict) and len(args) == 1:
        value = next(iter(args.values()))
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
    else:
        shown = json.dumps(args, default=str, ensure_ascii=False)
    name = call.get("name") or "tool"
    line = f"{name}: {' '.join(shown.split())}"
    pointer = key or call.get("id")
    if source and pointer:
        head = f"{name} ({pointer}): "
        shown = line[len(name) + 2 :]
        room = max(max_chars - len(head), 4)
        return head + (shown if len(shown) <= room else shown[: room - 4] + " ...")
    return line if len(line) <= max_chars else line[: max(max_chars - 4, 1)] + " ..."


def _collect(
    dropped: Sequence[BaseMessage],
    call_chars: int,
    enough: int,
    sources: bool,
    ordinals: Mapping[str, int],
) -> tuple[list[str], list[str], int]:
    """Tool-call lines and names of the dropped messages, oldest first.

    Also how many messages they stand for. Read newest first, and only until
    each list holds ``enough`` characters: the digest lists the newest that
    fit, so older messages need no scan. A call whose result has a place in
    ``ordinals`` is named by its key; a carried digest's lines lose theirs
    (a place in a history that may have been rewritten since).
    """
    calls: list[str] = []
    names: dict[str, None] = {}
    call_size = name_size = 0
    count = sum(
        int((marker(m) or {}).get("dropped", 0)) if is_digest(m) else 1 for m in dropped
    )
    scan = _SCAN * enough
    for message in reversed(dropped):
        if (call_size >= enough and name_size >= enough) or scan <= 0:
            break
        mark = marker(message)
        if mark is not None and mark.get("kind") == "digest":
            found = [_OWN_KEY.sub(r"\1", str(c)) for c in mark.get("calls", ())]
            seen = [str(n) for n in mark.get("names", ())]
        else:
            found = []
            text = text_of(message.content)
            scan -= len(text)
            seen = mentioned_names(text)
            if isinstance(message, AIMessage):
                found = [
                    render_call(
                        dict(c), call_chars, source=sources, key=_key(c, ordinals)
                    )
                    for c in message.tool_calls
                ]
                for c in message.tool_calls:
                    seen += mentioned_names(
                        json.dumps(c.get("args") or {}, default=str)
                    )
        if call_size < enough:
            calls[:0] = found
            call_size += sum(len(c) for c in found)
        if name_size < enough:
            fresh = [x for x in dict.fromkeys(seen) if x not in names]
            # newest first: this message's names go before older ones
            names = {**dict.fromkeys(fresh), **names}
            name_size += sum(len(x) for x in fresh)
    return calls, list(names), count


def _key(call: Mapping[str, Any], ordinals: Mapping[str, int]) -> str:
    ordinal = ordinals.get(str(call.get("id") or ""))
    return "" if ordinal is None else result_key(ordinal)


def archived_keys(
    dropped: Sequence[BaseMessage], ordinals: Mapping[str, int]
) -> list[int]:
    """The places of the dropped results an archive holds (a non-empty text)."""
    return sorted(
        ordinals[m.tool_call_id]
        for m in dropped
        if isinstance(m, ToolMessage)
        and m.tool_call_id in ordinals
        and text_of(m.content)
    )


def _newest_within(items: Sequence[str], room: int, cost: Callable[[str], int]) -> int:
    """How many of the newest ``items`` fit in ``room`` (by ``cost`` each)."""
    used = taken = 0
    for item in reversed(items):
        used += cost(item)
        if used > room:
            break
        taken += 1
    return taken


def build_digest(
    dropped: Sequence[BaseMessage],
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    call_chars: int = 200,
    sources: bool = False,
    ordinals: Mapping[str, int] | None = None,
) -> HumanMessage | None:
    """The digest of ``dropped`` in at most ``max_tokens`` (None: nothing to say).

    The newest calls come first into the room (``_CALL_SHARE`` of it, then any
    left over), then the newest names not already in a listed call. ``sources``
    (results archived, ``GuardPolicy.archived_results``): each call names its
    result's key (``ordinals``: each result's place in the history, by call id;
    else its id), the note says how to read a result back, and one line names
    the keys of all the dropped results, listed calls or not.
    """
    if not dropped or max_tokens <= 0:
        return None
    places = ordinals if sources and ordinals is not None else {}
    keys = key_ranges(archived_keys(dropped, places))
    template = _ARCHIVED_HEAD if sources else _HEAD
    fixed = template.format(n=0)
    if keys:
        fixed += "\n" + _KEYS.format(ranges=keys)
    room = max_tokens - count(HumanMessage(fixed)) - 8
    calls, names, n = _collect(dropped, call_chars, int(room * 4), sources, places)
    head = template.format(n=n)
    if room <= 0:
        return None
    for shrink in (1.0, 0.8, 0.6, 0.4, 0.2):
        chars = int(room * 3.2 * shrink)
        k = _newest_within(calls, int(chars * _CALL_SHARE), lambda s: len(s) + 3)
        listed = calls[len(calls) - k :]
        left = chars - sum(len(s) + 3 for s in listed)
        shown = "\n".join(listed)
        fresh = [x for x in names if x not in shown]
        m = _newest_within(fresh, left, lambda s: len(s) + 2)
        named = fresh[len(fresh) - m :]
        message = _message(head, listed, len(calls), named, n, keys)
        if count(message) <= max_tokens:
            return message
    return None


def _message(
    head: str,
    calls: list[str],
    total_calls: int,
    names: list[str],
    dropped: int,
    keys: str,
) -> HumanMessage:
    parts = [head]
    if calls:
        which = "" if len(calls) == total_calls else f" (the last {len(calls)})"
        parts += [_CALLS.format(which=which), _OPEN]
        parts += [f"- {quote(c)}" for c in calls]
        parts.append(_CLOSE)
    if keys:
        parts.append(_KEYS.format(ranges=keys))
    if names:
        parts.append("Files and names they mentioned: " + ", ".join(names))
    return HumanMessage(
        "\n".join(parts),
        id=DIGEST_ID,
        additional_kwargs={
            MARKER_KEY: {
                "kind": "digest",
                "dropped": dropped,
                "calls": calls,
                "names": names,
            }
        },
    )


def insert_digest(
    kept: list[BaseMessage],
    dropped: Sequence[BaseMessage],
    at: int,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    call_chars: int = 200,
    sources: bool = False,
    ordinals: Mapping[str, int] | None = None,
) -> list[BaseMessage]:
    """``kept`` with the digest of the ``dropped`` turns at ``at``, where they were.

    ``kept`` itself when there is nothing to say or no room for it.
    """
    digest = build_digest(
        dropped,
        max_tokens=max_tokens,
        count=count,
        call_chars=call_chars,
        sources=sources,
        ordinals=ordinals,
    )
    if digest is None:
        return kept
    return [*kept[:at], digest, *kept[at:]]


def digest_trimmed(
    kept: list[BaseMessage],
    source: Sequence[BaseMessage],
    gone: Sequence[int],
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    call_chars: int = 200,
    sources: bool = False,
    originals: Mapping[str, BaseMessage] | None = None,
    ordinals: Mapping[str, int] | None = None,
    turns: TurnsForm | None = None,
) -> list[BaseMessage]:
    """The digest pass: ``kept`` with a note of ``source``'s messages at ``gone``.

    ``gone``: the indices the trim dropped (``Trimmed.gone``); the note goes
    where the first of them was. Each is read as the caller wrote it where
    ``originals`` (by id) has it: compression already shrank old results in
    the trim's input. ``ordinals``: each result's place in the caller's
    history (``result_ordinals``), the keys an archived digest names them by.
    ``kept`` itself when nothing was dropped, there is no room
    (``max_tokens``) or nothing to say. ``turns`` (``digest_form="turns"``):
    instead of the note, the newest dropped turns themselves, cut down
    (``_digest_turns``), read as the trim read them (``source``).
    """
    if not gone or max_tokens <= 0:
        return kept
    if turns is not None:
        done = digest_turns(
            kept, source, gone, turns, max_tokens=max_tokens, count=count
        )
        return done.messages
    by_id = originals or {}
    dropped = [by_id.get(m.id, m) if m.id else m for m in (source[i] for i in gone)]
    return insert_digest(
        kept,
        dropped,
        gone[0],
        max_tokens=max_tokens,
        count=count,
        call_chars=call_chars,
        sources=sources,
        ordinals=ordinals,
    )


@dataclass(frozen=True, slots=True)
class Digested:
    """A turns digest's output, and the first place of its source it read.

    ``read_from``: where the weighing of the dropped turns began
    (``_digest_turns.Chosen``), as a place of the trim's input; None when no
    turn was weighed (no room for one).
    """

    messages: list[BaseMessage]
    read_from: int | None


def digest_turns(
    kept: list[BaseMessage],
    source: Sequence[BaseMessage],
    gone: Sequence[int],
    form: TurnsForm,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
) -> Digested:
    """``kept`` with the turns digest of ``source``'s ``gone`` messages.

    Each cut-down message goes where its original was, among those kept
    (a pinned message or a held call may sit between dropped turns). With
    archived results, a result whose turn did not fit keeps its way back in
    a short note before them (``_keys_note``), in the same room.
    """
    dropped = [source[i] for i in gone]
    places = None if isinstance(form.name_source, bool) else form.name_source
    archived = set(archived_keys(dropped, places)) if places is not None else set()
    note = _keys_note(archived, len(gone))
    size = count(note) if note is not None else 0
    if size > max_tokens:
        note, size = None, 0
    room = max_tokens - size
    chosen = chosen_turns(dropped, form, max_tokens=room, count=count) if room else None
    made = chosen.made if chosen is not None else []
    read_from = gone[chosen.read_from] if chosen is not None else None
    if note is not None and places is not None and _pointed(made, places) >= archived:
        note = None
    if not made and note is None:
        return Digested(kept, read_from)
    first = [note] if note is not None else []
    at = {gone[j]: message for j, message in made}
    if len(kept) + len(gone) != len(source):  # not a plain removal: keep them together
        out = [*kept[: gone[0]], *first, *at.values(), *kept[gone[0] :]]
        return Digested(out, read_from)
    dropped_at, rest = set(gone), iter(kept)
    out = []
    for i in range(len(source)):
        if i == gone[0]:
            out += first
        if i not in dropped_at:
            out.append(next(rest))
        elif i in at:
            out.append(at[i])
    return Digested(out, read_from)


def _pointed(
    made: Sequence[tuple[int, BaseMessage]], places: Mapping[str, int]
) -> set[int]:
    """The keys the turns digest's placeholders name."""
    ids = (m.tool_call_id for _, m in made if isinstance(m, ToolMessage))
    return {places[i] for i in ids if i in places}


def _keys_note(archived: set[int], n: int) -> HumanMessage | None:
    """A note naming the keys of the ``archived`` trimmed results (None: none).

    The turns digest names a kept turn's results in its placeholders; a turn
    that did not fit, or was left out (signed), keeps its way back here.
    """
    keys = key_ranges(archived)
    if not keys:
        return None
    text = _TURNS_HEAD.format(n=n) + "\n" + _KEYS.format(ranges=keys)
    mark = {"kind": "digest", "dropped": n, "calls": [], "names": []}
    return HumanMessage(text, id=DIGEST_ID, additional_kwargs={MARKER_KEY: mark})
