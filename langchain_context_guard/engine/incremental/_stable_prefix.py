"""The previous prompt, kept: appending to it while it fits (``stable_prefix``).

A provider bills a prompt's longest prefix it has seen before at a fraction of
the price (prompt caching), and every rewrite of an old message re-bills all
that follows it. So between prunings the guard sends exactly what it sent last
time plus the new messages (each through the per-message passes: sanitize,
truncate, hygiene), for as long as that fits; a history that no longer fits is
pruned afresh, well below the budget (``GuardPolicy.prune_to``), so the next
prunings are far apart. On the replay of the shared trajectories this bills
19% less input than pruning every call to the budget (BENCHMARKS.md).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from .._events import EventKind
from .._messages import label, marker, same_message
from ..passes._hygiene import join_turns, joinable
from ..passes._repair import calls_as, repeat_id, result_as, synthetic_result
from ..tokens._anchor import Gauge, Known
from ..tokens._counters import content_key
from ._extends import edited_in_place, extends_unchanged, recent_contents

if TYPE_CHECKING:
    from ._record import CallKey

Each = Callable[[BaseMessage], BaseMessage | None]
_content = attrgetter("content")


def pending_calls(messages: Sequence[BaseMessage]) -> frozenset[str]:
    """Tool calls of the last assistant message not yet answered after it."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
            continue
        if isinstance(message, AIMessage):
            return frozenset(c["id"] or "" for c in message.tool_calls) - answered
        return frozenset()
    return frozenset()


@dataclass(frozen=True, slots=True)
class CallIds:
    """The tool call ids a prompt holds: its pruning's, and those appended since.

    Appending adds to the small second set only, so a warm call costs what it
    appends, not the size of the prompt.
    """

    pruned: frozenset[str] = frozenset()
    appended: frozenset[str] = frozenset()

    @classmethod
    def of(cls, messages: Sequence[BaseMessage]) -> CallIds:
        """The ids of the tool calls in ``messages``."""
        return cls(
            frozenset(
                c["id"] or ""
                for m in messages
                if isinstance(m, AIMessage) and m.tool_calls
                for c in m.tool_calls
            )
        )

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.appended or call_id in self.pruned

    def plus(self, ids: frozenset[str]) -> CallIds:
        """These ids and ``ids``."""
        return CallIds(self.pruned, self.appended | ids) if ids else self


@dataclass(frozen=True)
class Sent:
    """What the guard sent on its last call, and for which history."""

    key: CallKey
    source: list[BaseMessage]
    contents: list[Any]
    """Content objects of ``source``'s last messages (``recent_contents``)."""
    output: list[BaseMessage]
    body: int
    """Our (unscaled) count of ``output``."""
    pending: frozenset[str]
    intact: int
    """How many of ``output``'s first messages are ``source``'s very objects."""
    base: int = 0
    """Length of the history last pruned afresh; ``output`` extends that prompt."""
    size: int = 0
    """How many messages the history held: ``source[:size]`` (the guard's own
    list, which may have grown since: ``_anchor.Known``)."""
    cold: bool = False
    """The prune at ``base`` was taken because the provider's cache had expired
    (``cache_ttl_seconds``): a rebuild must cut as deep."""
    shaped: list[BaseMessage] | None = None
    """``output`` as the passes left it before hygiene: the prompt the next reply
    is produced behind, in the passes' terms (``_produced``)."""
    called: CallIds = CallIds()
    """The tool call ids ``output`` holds: a new call with one of them (ids must
    be unique in a request) is sent renamed (``_sent_as``)."""

    @classmethod
    def of(
        cls,
        key: CallKey,
        source: list[BaseMessage],
        output: list[BaseMessage],
        body: int,
        intact: int | None = None,
        contents: list[Any] | None = None,
        *,
        base: int | None = None,
        size: int | None = None,
        cold: bool = False,
        shaped: list[BaseMessage] | None = None,
        called: CallIds | None = None,
    ) -> Sent:
        """The record of one call.

        ``intact``, ``contents`` and ``called`` are found when not given; ``base``
        defaults to a fresh prune's. ``size``: the history is ``source[:size]``
        (default: all of it). ``cold``: the prune at ``base`` was timed by the
        cache. ``shaped``: ``output`` before hygiene.
        """
        size = len(source) if size is None else size
        history = source if len(source) == size else source[:size]
        if intact is None:
            intact = common_prefix(output, history, identical=True)
        if contents is None:
            contents = recent_contents(history)
        at = size if base is None else base
        pending = pending_calls(output)
        if called is None:
            called = CallIds.of(output)
        return cls(
            key,
            source,
            contents,
            output,
            body,
            pending,
            intact,
            at,
            size,
            cold,
            shaped,
            called,
        )

    def tail(
        self, history: list[BaseMessage], base: Known | None = None
    ) -> list[BaseMessage] | None:
        """The messages ``history`` adds to this call's history or to its output.

        ``history`` may extend the history this call was given (the caller kept
        its own state) or what it sent (the caller stored the output, as the
        adapters' persist modes do); None when it extends neither. The same
        objects are recognised at C speed; equal ones (a history rebuilt from a
        checkpoint) by comparing them. ``base``: a history ``history`` is known
        to extend unchanged.
        """
        n = self.size
        if base is not None and base.messages is self.source and base.size == n:
            return history[n:]
        source = self.source if len(self.source) == n else self.source[:n]
        if extends_unchanged(history, source, self.contents):
            return history[n:]
        if edited_in_place(history, source, self.contents):
            return None
        if len(history) >= n and all(map(same_message, history[:n], source)):
            return history[n:]
        m = len(self.output)
        if len(history) >= m and all(map(same_message, history[:m], self.output)):
            return history[m:]
        return None

    def intact_after(self, out: list[BaseMessage], history: list[BaseMessage]) -> int:
        """``common_prefix(out, history, identical=True)``, from where it may move.

        For ``out`` extending ``output`` and ``history`` extending ``source`` or
        ``output`` (``tail``): the shared prefix can only go on from ``intact``.
        """
        i = min(self.intact, len(out), len(history))
        if i and out[i - 1] is not history[i - 1]:
            return common_prefix(out, history, identical=True)
        n = min(len(out), len(history))
        while i < n and out[i] is history[i]:
            i += 1
        return i


@dataclass(frozen=True)
class Appended:
    """The previous output plus the new messages.

    The new messages as the per-message passes left them, with each pass's edits
    by output position.
    """

    messages: list[BaseMessage]
    body: int
    edits: dict[EventKind, list[str]]
    removed: dict[EventKind, list[str]]
    closing: tuple[BaseMessage, ...] = ()
    """Synthetic results for calls still open at the end: sent, not kept."""
    unchanged: int = 0
    """How many of the previous output's messages are sent unchanged (all but
    its last when a new assistant message was joined to it)."""
    shaped: list[BaseMessage] | None = None
    """The previous ``Sent.shaped`` plus the new messages before hygiene."""
    called: CallIds = CallIds()
    """``Sent.called`` with the new calls' ids."""


def append(
    sent: Sent,
    tail: list[BaseMessage],
    passes: Sequence[tuple[EventKind, Each]],
    count: Callable[[BaseMessage], int],
    *,
    bound: bool = False,
) -> Appended | None:
    """``sent.output`` plus ``tail``, through the per-message ``passes``.

    None when the tail needs more than those: a system message, or tool pairing
    that does not continue cleanly.
    """
    out = list(sent.output)
    shaped = None if sent.shaped is None else list(sent.shaped)
    body = sent.body
    pending = set(sent.pending)
    called = _Seen(sent.called)
    edits: dict[EventKind, list[str]] = {}
    removed: dict[EventKind, list[str]] = {}
    owner: dict[str, str] = {}
    for i, message in enumerate(tail):
        message = _sent_as(message, called, owner)
        if not _continues(message, pending, called):
            return None
        new: BaseMessage | None = message
        for kind, each in passes:
            if kind == "hygiene" and shaped is not None and new is not None:
                shaped.append(new)
            done = each(new) if new is not None else None
            if done is None:
                at = sent.size + i
                removed.setdefault(kind, []).append(label(message, at))
                new = None
                break
            if done is not new:
                edits.setdefault(kind, []).append(label(done, len(out)))
            new = done
        if new is not None and out and joinable(out[-1]) and isinstance(new, AIMessage):
            joined = join_turns(out[-1], new, bound=bound)  # as hygiene joins them
            removed.setdefault("hygiene", []).append(label(out[-1], len(out) - 1))
            edits.setdefault("hygiene", []).append(label(joined, len(out) - 1))
            body += count(joined) - count(out[-1])
            out[-1] = joined
        elif new is not None:
            out.append(new)
            body += count(new)
        elif isinstance(message, AIMessage):
            pending = set()  # its calls went with it
    if pending and not (out and isinstance(out[-1], AIMessage)):
        return None  # some results of the last step are in, not all
    unchanged = min(len(sent.output), len(out))
    if unchanged and out[unchanged - 1] is not sent.output[unchanged - 1]:
        unchanged -= 1  # its last message was joined (one join at most there)
    closing = _open_calls(out, pending)
    return Appended(out, body, edits, removed, closing, unchanged, shaped, called.ids())


def open_results(messages: Sequence[BaseMessage]) -> int:
    """How many trailing messages are the guard's results for open calls.

    The repair pass closes calls still open at the end with error results; they
    are sent but left out of what is kept, so the real results can follow.
    """
    n = 0
    for message in reversed(messages):
        mark = marker(message)
        if not (mark is not None and mark.get("kind") == "synthetic_result"):
            break
        n += 1
    return n if n < len(messages) else 0


class _Seen:
    """The ids of a prompt being appended to: ``Sent.called`` and the new ones."""

    def __init__(self, called: CallIds) -> None:
        self.called, self.new = called, set[str]()

    def __contains__(self, call_id: object) -> bool:
        return call_id in self.new or call_id in self.called

    def add(self, ids: Sequence[str]) -> None:
        self.new.update(ids)

    def ids(self) -> CallIds:
        return self.called.plus(frozenset(self.new))


def _sent_as(message: BaseMessage, called: _Seen, owner: dict[str, str]) -> BaseMessage:
    """``message`` with a call id the prompt holds sent as the repair pass names it.

    Its n-th use is ``<id>-<n>`` (``repeat_id``; here n is the first not in the
    prompt), and so are the results after it (``owner``: each renamed id's new
    name, until another message calls it). The previous prompt stays as it was.
    """
    if isinstance(message, ToolMessage):
        new = owner.get(message.tool_call_id)
        return message if new is None else result_as(message, new)
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return message
    renamed: dict[str, str] = {}
    for call_id in dict.fromkeys(c["id"] or "" for c in message.tool_calls):
        owner.pop(call_id, None)
        if call_id in called:
            n = next(
                n for n in itertools.count(2) if repeat_id(call_id, n, ()) not in called
            )
            renamed[call_id] = owner[call_id] = repeat_id(call_id, n, ())
    return calls_as(message, renamed) if renamed else message


def _continues(message: BaseMessage, pending: set[str], called: _Seen) -> bool:
    """Whether ``message`` may follow, given the calls still ``pending``.

    Updates ``pending``: a result answers its call, an assistant message opens
    its own; and ``called``, the ids sent. A call whose id was sent before
    (``_sent_as`` renames one) does not follow.
    """
    if isinstance(message, SystemMessage):
        return False
    if isinstance(message, ToolMessage):
        if message.tool_call_id not in pending:
            return False
        pending.discard(message.tool_call_id)
        return True
    if pending:
        return False
    if isinstance(message, AIMessage) and message.tool_calls:
        ids = [c["id"] or "" for c in message.tool_calls]
        if any(i in called for i in ids) or len(set(ids)) < len(ids):
            return False
        pending.update(ids)
        called.add(ids)
    return True


def _open_calls(out: list[BaseMessage], pending: set[str]) -> tuple[BaseMessage, ...]:
    """Error results for the last message's unanswered calls, in call order.

    A history may end with calls whose results are not in yet (a run stopped
    mid-step); providers reject that, so the prompt gets the results the repair
    pass would add, but they are not kept: the real ones will follow.
    """
    if not pending or not out or not isinstance(out[-1], AIMessage):
        return ()
    last = out[-1]
    return tuple(
        synthetic_result(c["id"] or "", c["name"])
        for c in last.tool_calls
        if (c["id"] or "") in pending
    )


def conversation(messages: list[BaseMessage]) -> tuple[Any, ...]:
    """Which conversation a history is, for ``stable_prefix``.

    Its first two messages (a shared system prompt, then its own first message)
    by value: id, type and a hash of what they hold. A history rebuilt on every
    call (a prompt template makes a new id-less system message each time, a
    checkpoint gives equal copies) is the same conversation as the same objects.
    """
    return tuple((m.id, content_key(m)) for m in messages[:2])


def kept_prompt_tokens(gauge: Gauge, body: int, intact: int) -> int:
    """Tokens a prompt kept between prunings is held to, to decide if it fits.

    The margin covers the whole prompt, anchored part included: the provider's
    count drifts from call to call (on the replay by up to ~1.5% in one step),
    and a prompt kept this long is the one most likely to sit at the budget.
    """
    return max(gauge.planned(body, intact), gauge.planned(body, 0))


def common_prefix(
    a: Sequence[BaseMessage], b: Sequence[BaseMessage], identical: bool = False
) -> int:
    """How many leading messages ``a`` and ``b`` share (same objects, or equal)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y and (identical or x != y):
            break
        n += 1
    return n
