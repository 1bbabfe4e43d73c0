"""Pass 6: make every tool call answered exactly once, right after it."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._events import Edits
from .._messages import MARKER_KEY, is_empty, label, memo_rewrite
from .._tool_calls import with_call_ids, without_tool_calls
from ._sanitize import with_invalid_call_notes

SYNTHETIC_RESULT = (
    "Error: no result is available for this tool call; it was lost or removed "
    "from the history. Call the tool again if you still need its output."
)


def synthetic_result(call_id: str, name: str) -> ToolMessage:
    """The error result the guard adds for a tool call that has none."""
    return ToolMessage(
        content=SYNTHETIC_RESULT,
        tool_call_id=call_id,
        name=name,
        status="error",
        id=f"context-guard-missing-{call_id}",
        additional_kwargs={MARKER_KEY: {"kind": "synthetic_result"}},
    )


def call_name(messages: Sequence[BaseMessage], i: int) -> str:
    """The tool name of the call the result ``messages[i]`` answers.

    Its call is in the assistant message before the results that follow it (as
    repaired); else the result's own name.
    """
    result = cast(ToolMessage, messages[i])
    j = i - 1
    while j >= 0 and isinstance(messages[j], ToolMessage):
        j -= 1
    owner = messages[j] if j >= 0 else None
    calls = owner.tool_calls if isinstance(owner, AIMessage) else []
    names = (c["name"] for c in calls if c["id"] == result.tool_call_id)
    return next(names, result.name or "")


@lru_cache(maxsize=256)
def stand_in_named(name: str) -> ToolMessage:
    """The synthetic result sent for a call to ``name`` while its result is not in.

    Counters count it by its name and content (``content_key``), not its id, so
    one per name is kept.
    """
    return synthetic_result("", name)


def repair_tool_pairs(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """Repair tool-call/tool-result pairing so a provider accepts the transcript.

    Moves a displaced result to just after its call, keeps the first of duplicate
    results, drops results whose call is gone, and adds a synthetic error result
    (``status="error"``, marked as made by the guard) after a call that has none.
    A call id that an earlier assistant message used (providers require each to
    be unique) is renamed in the later one, and in the results after it, to
    ``<id>-<n>`` for its n-th use (``repeat_id``), so every step is sent with its
    own output and the earlier messages stay as they were. Afterwards every tool call is
    answered exactly once by the ToolMessages directly after it, and no ToolMessage
    stands anywhere else. ``invalid_tool_calls`` (which langchain-openai sends as
    tool calls) are dropped, with their results, as ``sanitize_messages`` does (a
    note says which were not run, and why). Run it last, after
    anything that removes messages.
    """
    out, edits, _, _ = repair_part(messages)
    if edits:
        return out
    return messages if isinstance(messages, list) else out


@dataclass(frozen=True, slots=True)
class Pairing:
    """What repairing a history saw: enough to repair its continuation alone.

    Repairing ``history + more`` equals the repaired history followed by ``more``
    repaired against this, unless ``more`` answers a call in ``missing`` or calls
    an id in ``orphans`` (results earlier in the history would then move).
    """

    calls: frozenset[str] = frozenset()
    missing: frozenset[str] = frozenset()
    orphans: frozenset[str] = frozenset()
    last: int = -1
    """Input index of the last message kept (to tell moved results)."""
    open: bool = False
    """The history ends with a call still waiting for its result."""

    def continues(self, more: Sequence[BaseMessage]) -> bool:
        """Whether ``more`` can be repaired against this alone.

        Not when it reuses an id called before (its calls are renamed counting
        every use) or answers a missing call or calls an orphan's id.
        """
        for m in more:
            if isinstance(m, AIMessage):
                for c in m.tool_calls:
                    call_id = c["id"] or ""
                    if call_id in self.calls or call_id in self.orphans:
                        return False
            elif isinstance(m, ToolMessage) and m.tool_call_id in self.missing:
                return False
        return True


def _zero(_message: BaseMessage) -> int:
    return 0


def repair_part(  # noqa: C901
    messages: Sequence[BaseMessage],
    start: int = 0,
    out_start: int = 0,
    before: Pairing | None = None,
    count: Callable[[BaseMessage], int] = _zero,
) -> tuple[list[BaseMessage], Edits, int, Pairing]:
    """Repair ``messages[start:]`` as the continuation of a history ``before`` saw.

    Returns the repaired part (it goes at output index ``out_start``), its edits,
    its token change by ``count``, and the pairing state after it.
    """
    prior = before or Pairing()
    out: list[BaseMessage] = []
    changed: list[str] = []
    given = messages
    messages, renamed_at = _renamed_repeats(messages, start)
    # a renamed id is part of the message: its count changes with it
    delta = sum(count(messages[i]) - count(given[i]) for i in renamed_at)
    first_result: dict[str, int] = {}
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, ToolMessage):
            first_result.setdefault(m.tool_call_id, i)
    added: list[str] = []
    calls: set[str] = set()
    missing: set[str] = set()
    emitted: set[int] = set()
    removed_invalid: list[str] = []
    last = prior.last
    is_open = prior.open
    for i in range(start, len(messages)):
        message = messages[i]
        if isinstance(message, ToolMessage):
            continue  # placed after its call below, or dropped as an orphan
        is_open = False
        if isinstance(message, AIMessage) and message.invalid_tool_calls:
            valid = _without_invalid(message)
            if valid is None:
                removed_invalid.append(label(message, i))
                delta -= count(message)
                continue
            changed.append(label(valid, out_start + len(out)))
            delta += count(valid) - count(message)
            message = valid
        if not isinstance(message, AIMessage) or not message.tool_calls:
            out.append(message)
            last = i
            continue
        new = _without_repeats(message, prior.calls, calls)
        if new is not message or i in renamed_at:
            changed.append(label(new, out_start + len(out)))
            delta += count(new) - count(message)
        out.append(new)
        last = i
        found: list[int] = []
        lacking: list[ToolMessage] = []
        for call in new.tool_calls:
            call_id = call["id"] or ""
            calls.add(call_id)
            j = first_result.get(call_id)
            if j is not None:
                found.append(j)
            else:
                missing.add(call_id)
                lacking.append(synthetic_result(call_id, call["name"]))
        # Results keep the order they had; synthetic ones follow, in call order.
        for j in sorted(found):
            if j != last + 1 or j in renamed_at:
                changed.append(label(messages[j], out_start + len(out)))
            out.append(messages[j])
            emitted.add(j)
            last = j
        for synthetic in lacking:
            added.append(label(synthetic, out_start + len(out)))
            delta += count(synthetic)
            out.append(synthetic)
        is_open = bool(lacking)
    removed = removed_invalid
    orphans: set[str] = set()
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, ToolMessage) and i not in emitted:
            removed.append(label(m, i))
            delta -= count(m)
            if m.tool_call_id not in calls and m.tool_call_id not in prior.calls:
                orphans.add(m.tool_call_id)
    state = Pairing(
        prior.calls | calls if calls else prior.calls,
        prior.missing | missing if missing else prior.missing,
        prior.orphans | orphans if orphans else prior.orphans,
        last,
        is_open,
    )
    return out, Edits(tuple(changed), tuple(removed), tuple(added)), delta, state


def _without_invalid(message: AIMessage) -> AIMessage | None:
    """``message`` without its ``invalid_tool_calls`` (None: nothing left to send).

    langchain-openai sends them as tool calls, which then need results; like
    ``sanitize_messages``, the repair drops them (and so their results).
    """

    def build(m: AIMessage) -> BaseMessage:
        valid = {c["id"] or "" for c in m.tool_calls}
        bad = {c.get("id") or "" for c in m.invalid_tool_calls} - valid
        cleaned = without_tool_calls(m, bad)
        cleaned = cleaned.model_copy(update={"invalid_tool_calls": []})
        cleaned = with_invalid_call_notes(cleaned, m.invalid_tool_calls)
        return _DROPPED if is_empty(cleaned) else cleaned

    new = memo_rewrite(message, "repair-invalid", build)
    return None if new is _DROPPED else cast(AIMessage, new)


_DROPPED = AIMessage("")
"""Stands for "drop this message" in ``_without_invalid``'s cache."""


def repeat_id(call_id: str, n: int, taken: Collection[str]) -> str:
    """The id the ``n``-th use of ``call_id`` is sent with: ``<id>-<n>``, not taken."""
    new = f"{call_id}-{n}"
    while new in taken:
        new += "-"
    return new


def _renamed_repeats(
    messages: Sequence[BaseMessage], start: int
) -> tuple[Sequence[BaseMessage], frozenset[int]]:
    """``messages`` with each reused call id renamed from its second use on.

    The n-th assistant message calling an id sends it as ``repeat_id``, and so
    do the results with that id after it, up to the next message calling it (a
    result before it answers the earlier call). Returns the messages (``messages``
    itself when no id is reused) and the indices renamed.
    """
    taken: set[str] = set()
    reused = False
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, AIMessage) and m.tool_calls:
            for c in m.tool_calls:
                call_id = c["id"] or ""
                reused = reused or call_id in taken  # (or twice in one message)
                taken.add(call_id)
    if not reused:
        return messages, frozenset()
    seen: dict[str, int] = {}
    owner: dict[str, str] = {}
    out = list(messages)
    at: set[int] = set()
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, ToolMessage) and m.tool_call_id in owner:
            out[i] = result_as(m, owner[m.tool_call_id])
            at.add(i)
        if not isinstance(m, AIMessage) or not m.tool_calls:
            continue
        renamed: dict[str, str] = {}
        for call_id in dict.fromkeys(c["id"] or "" for c in m.tool_calls):
            seen[call_id] = seen.get(call_id, 0) + 1
            owner.pop(call_id, None)
            if seen[call_id] > 1:
                renamed[call_id] = owner[call_id] = repeat_id(
                    call_id, seen[call_id], taken
                )
                taken.add(renamed[call_id])
        if renamed:
            out[i] = calls_as(m, renamed)
            at.add(i)
    return out, frozenset(at)


def result_as(message: ToolMessage, call_id: str) -> BaseMessage:
    """``message`` answering ``call_id`` (memoised)."""

    def build(m: BaseMessage) -> BaseMessage:
        return m.model_copy(update={"tool_call_id": call_id})

    return memo_rewrite(message, ("repeat", call_id), build)


def calls_as(message: AIMessage, renamed: dict[str, str]) -> BaseMessage:
    """``message`` with its calls ``renamed`` (``with_call_ids``, memoised)."""

    def build(m: BaseMessage) -> BaseMessage:
        return with_call_ids(cast(AIMessage, m), renamed)

    return memo_rewrite(message, ("repeat", tuple(sorted(renamed.items()))), build)


def _without_repeats(
    message: AIMessage, prior: frozenset[str], seen: set[str]
) -> AIMessage:
    """Drop call ids already used earlier, or earlier in the same message."""
    ids = [c["id"] or "" for c in message.tool_calls]
    repeated = frozenset(i for i in ids if i in prior or i in seen)
    if not repeated and len(set(ids)) == len(ids):
        return message

    def build(m: AIMessage) -> BaseMessage:
        kept = []
        used = set(repeated)
        for call in m.tool_calls:
            call_id = call["id"] or ""
            if call_id not in used:
                kept.append(call)
            used.add(call_id)
        return without_tool_calls(m, repeated).model_copy(update={"tool_calls": kept})

    return cast(AIMessage, memo_rewrite(message, ("repair", repeated), build))
