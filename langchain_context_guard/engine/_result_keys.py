"""Short archive keys of tool results: ``#1`` is the history's first result.

With archived results (``GuardPolicy.archived_results``) the digest of trimmed
turns names each archived output by a key of a few characters instead of its
tool call id (12 to 26 tokens with a provider's long ids), and names all of
them in one line of ranges (``#1-#140``), so every trimmed result keeps a way
back however many there are. A result's key is its place among the tool results
of the history the guard reads (the first result with a given call id counts):
the same history gives the same keys, so the prompt stays byte-identical, and
an adapter's ``ResultArchive`` numbers the results it saves the same way, from
the same messages, and stores each key with the call id it stands for, per
conversation. A history that only grows keeps every key; one rewritten (a hook
in persist mode, a compaction) numbers what is left, and the archive moves a
key to the result that now holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

_KEY = re.compile(r"#(\d+)")
TURN = "@turn"
"""What a key ends with to name the assistant turn that made a call: its words
and its calls in full (``turn_key``), archived when the guard cuts its text or
trims the turn."""
_RANGE = re.compile(r"#(\d+)(?:-#(\d+))?")


def result_ordinals(messages: Sequence[BaseMessage]) -> dict[str, int]:
    """Each tool call id of ``messages``' results with its place, from 1."""
    out: dict[str, int] = {}
    for message in messages:
        if isinstance(message, ToolMessage) and message.tool_call_id:
            out.setdefault(message.tool_call_id, len(out) + 1)
    return out


def result_key(ordinal: int) -> str:
    """The key the digest names the ``ordinal``-th result by (``#12``)."""
    return f"#{ordinal}"


def parse_result_key(text: str) -> int | None:
    """The ordinal a key stands for (``"#12"`` -> 12); None when it is not one."""
    match = _KEY.fullmatch(text.strip())
    return int(match.group(1)) if match else None


def key_ranges(ordinals: Iterable[int]) -> str:
    """``ordinals`` as runs of keys, ascending: ``#1-#40, #42, #45-#47``."""
    runs: list[list[int]] = []
    for n in sorted(set(ordinals)):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    return ", ".join(
        result_key(a) if a == b else f"{result_key(a)}-{result_key(b)}" for a, b in runs
    )


def keys_in_ranges(text: str) -> list[int]:
    """The ordinals a ``key_ranges`` text names, in order."""
    out: list[int] = []
    for match in _RANGE.finditer(text):
        first = int(match.group(1))
        last = int(match.group(2) or first)
        out += range(first, last + 1)
    return out


Naming = bool | Mapping[str, int]
"""How a marker names the result it cut: not at all (False), by its tool call
id (True), or by its key where the mapping (``result_ordinals``) gives it a
place, else by its call id."""


def naming(archived: bool, ordinals: Mapping[str, int] | None) -> Naming:
    """The ``Naming`` of a policy's markers: keys where ``ordinals`` are known."""
    if not archived:
        return False
    return True if ordinals is None else ordinals


def turn_key(ref: str) -> str:
    """The key of the assistant turn that made a call (``#12@turn``, ``c1@turn``).

    ``ref`` is the call's result key or its id.
    """
    return f"{ref}{TURN}"


def pointer(message: BaseMessage, names: Naming) -> str | None:
    """What a marker in ``message`` names it by, if anything (``Naming``).

    An assistant message is named by the ``turn_key`` of its first call, or
    of its own id when it made none.
    """
    if names is False:
        return None
    if isinstance(message, ToolMessage):
        return _name(message.tool_call_id, names)
    if not isinstance(message, AIMessage):
        return None
    if message.tool_calls:
        ref = _name(message.tool_calls[0].get("id") or "", names)
    else:
        ref = message.id
    return turn_key(ref) if ref else None


def _name(call_id: str, names: Naming) -> str | None:
    """A call's key where ``names`` gives it a place, else its id (if any)."""
    place = names.get(call_id) if not isinstance(names, bool) else None
    return result_key(place) if place is not None else call_id or None
