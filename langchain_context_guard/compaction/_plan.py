"""Compaction engine: where to cut and how to rebuild the history.

Pure functions over messages; the summary lives in ``_summary.py``, its prompts in
``_summary_prompt.py``, the summarizer call in ``_summarizer.py``. The cut never
falls inside a tool call and its results (a parallel batch is one unit), so the
summary never stands between a call and its result. When the cut falls inside a
turn and earlier turns exist, the turn's beginning is summarised on its own
(pi-mono's split turn). System messages are never summarised. A previous summary
is updated, not summarised again.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ..engine import (
    is_pinned,
    is_user,
    repair_tool_pairs,
    text_of,
    truncate_text,
    without_usage,
)
from ._summary import (
    Summary,
    last_summary,
    parse_sections,
    read_summary,
    summary_message,
)

__all__ = [  # the summary helpers are re-exported: one import for the engine
    "CompactionPlan",
    "Counter",
    "Mode",
    "Summary",
    "parse_sections",
    "plan_compaction",
    "read_summary",
    "rebuild",
    "summary_message",
    "tool_units",
]

Counter = Callable[[BaseMessage], int]
Mode = Literal["keep_recent", "rebuild"]
_PATH_KEYS = frozenset(
    {"path", "file_path", "filepath", "filename", "file", "url", "uri", "directory"}
)
_MAX_TOUCHED = 100


@dataclass(frozen=True)
class CompactionPlan:
    """What one compaction summarises, replaces and keeps.

    ``history`` goes to the sectioned summary (updating ``previous``), ``turn_prefix``
    (only for a split turn) to its own short summary, and ``kept`` stays verbatim.
    """

    system: tuple[BaseMessage, ...]
    previous: BaseMessage | None
    history: tuple[BaseMessage, ...]
    turn_prefix: tuple[BaseMessage, ...]
    kept: tuple[BaseMessage, ...]
    original_request: str = ""
    turn_request: str = ""
    touched: tuple[str, ...] = field(default_factory=tuple)
    appended: bool = False
    """Whether the summary is asked by appending one instruction to the
    conversation as sent (``summary_mode="append"``); else the serialised prompt."""
    sent: tuple[BaseMessage, ...] = field(default_factory=tuple)
    """The history as the agent's model call sends it, when that differs from the
    state (an appended request asks from it; empty: the state as it is)."""
    user_words: tuple[BaseMessage, ...] = field(default_factory=tuple)
    """The user's own messages of ``history`` and ``turn_prefix`` kept verbatim
    after the summary (``keep_user_tokens``), in their order; summarised too,
    never removed."""
    pinned: tuple[BaseMessage, ...] = field(default_factory=tuple)
    """The pinned messages of ``history`` and ``turn_prefix`` (``engine.pin``),
    with the tool calls and results they belong to, kept verbatim after the
    summary in their order; summarised too, never removed."""
    requested: str | None = None
    """The instructions the agent's model gave when it asked for this compaction
    (``compact_context``; ``""``: none); None when the trigger started it."""

    @property
    def split(self) -> bool:
        """Whether the cut falls inside a turn whose beginning is summarised apart."""
        return bool(self.turn_prefix)

    @property
    def removed(self) -> tuple[BaseMessage, ...]:
        """Every message the compaction takes out of the history."""
        head = (self.previous,) if self.previous is not None else ()
        kept = {id(m) for m in (*self.user_words, *self.pinned)}
        gone = (m for m in (*self.history, *self.turn_prefix) if id(m) not in kept)
        return (*head, *gone)

    @property
    def verbatim(self) -> tuple[BaseMessage, ...]:
        """The summarised messages kept after the summary: user words and pins."""
        kept = {id(m) for m in (*self.user_words, *self.pinned)}
        return tuple(m for m in (*self.history, *self.turn_prefix) if id(m) in kept)

    @property
    def previous_summary(self) -> Summary | None:
        """The previous summary's content, if there is one."""
        return read_summary(self.previous) if self.previous is not None else None


def tool_units(messages: Sequence[BaseMessage]) -> list[list[BaseMessage]]:
    """Split messages into units a cut may not enter.

    An assistant message with tool calls forms one unit with everything up to its
    last result (a parallel batch included), each call answered by the first result
    after it (ids reused later in the history do not merge units); a stray result
    joins the unit before it.
    """
    results: dict[str, list[int]] = {}
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            results.setdefault(m.tool_call_id, []).append(i)
    units: list[list[BaseMessage]] = []
    i = 0
    while i < len(messages):
        end = j = i
        while j <= end:
            m = messages[j]
            if isinstance(m, AIMessage):
                for call in m.tool_calls:
                    at = results.get(call["id"] or "", [])
                    k = bisect.bisect_right(at, j)
                    end = max(end, at[k] if k < len(at) else j)
            j += 1
        while end + 1 < len(messages) and isinstance(messages[end + 1], ToolMessage):
            end += 1
        if isinstance(messages[i], ToolMessage) and units:
            units[-1].extend(messages[i : end + 1])
        else:
            units.append(list(messages[i : end + 1]))
        i = end + 1
    return units


def _first_kept_unit(
    units: list[list[BaseMessage]],
    count: Counter,
    keep_tokens: int | None,
    keep_messages: int | None,
) -> int:
    """Index of the first unit kept verbatim; the newest unit is always kept."""
    first = len(units) - 1
    if keep_messages is not None:
        kept = len(units[first])
        while first > 0 and kept < keep_messages:
            first -= 1
            kept += len(units[first])
        return first
    budget = keep_tokens or 0
    used = sum(count(m) for m in units[first])
    while first > 0:
        cost = sum(count(m) for m in units[first - 1])
        if used + cost > budget:
            break
        used += cost
        first -= 1
    return first


def plan_compaction(
    messages: Sequence[BaseMessage],
    *,
    count: Counter,
    keep_tokens: int | None = 20_000,
    keep_messages: int | None = None,
    mode: Mode = "keep_recent",
    max_request_chars: int = 16_000,
    user_tokens: int = 0,
) -> CompactionPlan | None:
    """Decide what to summarise and what to keep; ``None`` if nothing can go.

    ``keep_recent`` keeps the newest ``keep_tokens`` (or ``keep_messages``) verbatim,
    cut at a unit boundary; ``rebuild`` (restart from the summary) keeps only the
    latest user message after the summary. ``user_tokens`` keeps the user's own
    messages of the summarised range verbatim too (``keep_user_tokens``).
    """
    system = tuple(m for m in messages if isinstance(m, SystemMessage))
    previous = last_summary(messages)
    body = [
        m for m in messages if not isinstance(m, SystemMessage) and m is not previous
    ]
    prev = read_summary(previous) if previous is not None else None
    users = [m for m in body if is_user(m)]
    request = prev.original_request if prev and prev.original_request else ""
    if not request and users:
        request = _clip(text_of(users[0].content), max_request_chars)
    turn_prefix: list[BaseMessage] = []
    turn_request = ""
    if mode == "rebuild":
        question = users[-1] if users else None
        history = [m for m in body if m is not question]
        kept = [question] if question is not None else []
    else:
        units = tool_units(body)
        if len(units) < 2:
            return None
        first = _first_kept_unit(units, count, keep_tokens, keep_messages)
        head = [m for unit in units[:first] for m in unit]
        kept = [m for unit in units[first:] for m in unit]
        history = head
        if not is_user(kept[0]):
            starts = [i for i, m in enumerate(head) if is_user(m)]
            if starts and starts[-1] > 0:
                history, turn_prefix = head[: starts[-1]], head[starts[-1] :]
                turn_request = _clip(text_of(turn_prefix[0].content), max_request_chars)
    if not history and not turn_prefix:
        return None
    touched = _touched(
        [*history, *turn_prefix], prev.touched if prev is not None else ()
    )
    return CompactionPlan(
        system=system,
        previous=previous,
        history=tuple(history),
        turn_prefix=tuple(turn_prefix),
        kept=tuple(kept),
        original_request=request,
        turn_request=turn_request,
        touched=touched,
        user_words=keep_user_words(
            [*history, *turn_prefix],
            count=count,
            max_tokens=user_tokens,
            request=request,
        ),
        pinned=pinned_units([*history, *turn_prefix]),
    )


def pinned_units(messages: Sequence[BaseMessage]) -> tuple[BaseMessage, ...]:
    """The ``tool_units`` of ``messages`` that hold a pinned message, in order."""
    return tuple(
        m for unit in tool_units(messages) if any(map(is_pinned, unit)) for m in unit
    )


def keep_user_words(
    history: Sequence[BaseMessage], *, count: Counter, max_tokens: int, request: str
) -> tuple[BaseMessage, ...]:
    """The user's messages of a summarised range that stay, newest first to the cap.

    A message over what is left of ``max_tokens`` ends the walk, so what is kept
    is always the newest run of requests, in order. The original request is left
    out when the summary already quotes it whole.
    """
    if max_tokens <= 0:
        return ()
    kept: list[BaseMessage] = []
    used = 0
    for m in reversed(history):
        if not is_user(m) or text_of(m.content) == request:
            continue
        used += count(m)
        if used > max_tokens:
            break
        kept.append(m)
    return tuple(reversed(kept))


def _clip(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    half = max_chars // 2 - 100
    return truncate_text(text, max_chars, half, half)


def _touched(messages: Iterable[BaseMessage], before: Sequence[str]) -> tuple[str, ...]:
    """Paths and URLs named in tool-call arguments, first seen first."""
    out = list(before)
    seen = set(out)
    for m in messages:
        if not isinstance(m, AIMessage):
            continue
        for call in m.tool_calls:
            args = call.get("args")
            if not isinstance(args, dict):
                continue
            for key, value in args.items():
                if key in _PATH_KEYS and isinstance(value, str) and value not in seen:
                    seen.add(value)
                    out.append(value)
    return tuple(out[-_MAX_TOUCHED:])


def rebuild(plan: CompactionPlan, summary: HumanMessage) -> list[BaseMessage]:
    """System messages, the summary, the user's kept words and pins, the kept tail.

    The user's words and the pinned units sit between the summary and the tail:
    all of them come before the tail and none inside a tool call's unit, so the
    order is kept and no text falls between a call and its result. Kept replies
    lose their ``usage_metadata``: it counts the pre-compaction prompt and would
    make every token count anchored on it far too high; tool pairs are repaired.
    """
    tail = (without_usage(m) for m in plan.kept)
    out = [*plan.system, summary, *plan.verbatim, *tail]
    return repair_tool_pairs(out)
