"""What a first run of the passes counts, so a cold history is counted in one batch.

A run with no previous call to grow from counts every message, every assistant
message as truncation leaves it (``dedupe_call_text`` rewrites most of them),
and every tool result (with ``compress_assistant_text``, its assistant messages
too) as compression would leave it: the trim plan weighs each result at its
compressed size. ``TiktokenCounter.prime`` encodes all of those texts in one
batch on tiktoken's threads; counted one by one, each would wait on the last.
The rewrites are made before the batch, not while it encodes: Python work then
holds the GIL the encoding threads need between texts (measured: no faster).
Each rewrite goes with its original (``pairs``): most keep its head, so the two
are counted from shared pieces (``_pieces``) and the batch holds about the
history's text once. The call's ``CallCounts`` also keeps one truncate and one
compress for all its runs (``rewriters``), their results by identity.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._policy import GuardPolicy
from .._result_keys import result_ordinals
from ..passes._compress import compressor
from ..passes._truncate import truncator

Count = Callable[[BaseMessage], int]
Rewrite = Callable[[BaseMessage], BaseMessage]
Prime = Callable[[Sequence[BaseMessage]], Any]


Rewriters = tuple[Callable[[BaseMessage], BaseMessage | None], Rewrite]
R = TypeVar("R")


def rewriters(
    policy: GuardPolicy,
    window: int,
    count: Count,
    ordinals: Mapping[str, int] | None = None,
) -> Rewriters:
    """One message truncated, and compressed, as the passes do it for ``window``.

    ``ordinals``: the history's result keys (``Setting.ordinals``).

    Counting through a call's ``CallCounts``, the same two for the whole call,
    each keeping its results by identity (most messages are rewritten by the
    first batch, the passes and the trim plan: a table hit is cheaper than the
    memo's).
    """
    if not isinstance(count, CallCounts):
        return _rewriters(policy, window, count, ordinals)
    key = (id(policy), window, id(ordinals))
    got = count.rewriters.get(key)
    if got is None:
        truncate, compress = _rewriters(policy, window, count, ordinals)
        got = count.rewriters[key] = (_once(truncate), _once(compress))
    return got


def _once(rewrite: Callable[[BaseMessage], R]) -> Callable[[BaseMessage], R]:
    """``rewrite``, its results kept by message identity (messages held).

    Two tables, no tuple per message: fewer objects for the garbage collector.
    """
    held: dict[int, BaseMessage] = {}
    results: dict[int, R] = {}

    def once(message: BaseMessage) -> R:
        key = id(message)
        if held.get(key) is message:
            return results[key]
        out = rewrite(message)
        held[key] = message
        results[key] = out
        return out

    return once


def _rewriters(
    policy: GuardPolicy,
    window: int,
    count: Count,
    ordinals: Mapping[str, int] | None,
) -> Rewriters:
    truncate = truncator(policy, policy.budget(window), count, ordinals)
    compress = compressor(policy, window, ordinals)
    return truncate, compress


def rewrites(
    source: Sequence[BaseMessage],
    truncate: Callable[[BaseMessage], BaseMessage | None],
    compress: Rewrite,
    assistant: bool,
    pairs: list[tuple[BaseMessage, BaseMessage]] | None = None,
) -> list[BaseMessage]:
    """The rewritten messages a first run over ``source`` counts (not ``source``'s).

    Assistant messages as truncation leaves them (no count needed: only tool
    results are cut to a token share) and, with ``assistant``, compressed; tool
    results compressed as they are (the few that truncation cuts are counted
    when cut). Memoised rewrites: the run gets these very objects. ``pairs``
    gets each (message, rewrite of it) pair, for ``TiktokenCounter.prime``.
    """
    out: list[BaseMessage] = []
    for message in source:
        if isinstance(message, AIMessage):
            kept = truncate(message)
            if kept is None:
                continue
            if kept is not message:
                out.append(kept)
                if pairs is not None:
                    pairs.append((message, kept))
            if assistant and (short := compress(kept)) is not kept:
                out.append(short)
        elif isinstance(message, ToolMessage):
            short = compress(message)
            if short is not message:
                out.append(short)
                if pairs is not None:
                    pairs.append((message, short))
    return out


def first_rewrites(
    original: list[BaseMessage],
    policy: GuardPolicy,
    window: int,
    count: Count,
    pairs: list[tuple[BaseMessage, BaseMessage]] | None = None,
) -> list[BaseMessage]:
    """The rewrites a first run of the passes over ``original`` counts."""
    ordinals = result_ordinals(original) if policy.archived_results else None
    truncate, compress = rewriters(policy, window, count, ordinals)
    assistant = policy.compress_assistant_text
    return rewrites(original, truncate, compress, assistant, pairs)


class CallCounts:
    """``count`` remembering, for one call, every message it counted by identity.

    A first run counts most messages several times (the scan, each pass, the
    trim plan); a 50,000-message history overflows the counter's own identity
    table, so each of those would hash the message again. The messages are held
    (no id is reused while kept) until ``close``. Flat lists and an int table:
    few objects for the garbage collector to walk.
    """

    def __init__(
        self, count: Count, primed: tuple[list[BaseMessage], list[int]] | None = None
    ) -> None:
        self._count = count
        self._messages: list[BaseMessage] = []
        self._counts: list[int] = []
        self._at: dict[int, int] = {}
        self.rewriters: dict[tuple[int, int, int], Rewriters] = {}
        """This call's ``rewriters``, by policy identity and window."""
        if primed is not None:
            self.add(primed)

    def add(self, primed: tuple[list[BaseMessage], list[int]]) -> None:
        """Take ``prime``'s counts."""
        messages, counts = primed
        at, n = self._at, len(self._messages)
        for i, m in enumerate(messages, start=n):
            at[id(m)] = i
        self._messages += messages
        self._counts += counts

    def __call__(self, message: BaseMessage) -> int:
        """The count of ``message``, from this call's table when it is there."""
        i = self._at.get(id(message))
        if i is not None and self._messages[i] is message:
            return self._counts[i]
        n = self._count(message)
        self._at[id(message)] = len(self._messages)
        self._messages.append(message)
        self._counts.append(n)
        return n

    def close(self) -> None:
        """Let the messages go."""
        self._messages, self._counts, self._at = [], [], {}
        self.rewriters = {}


def count_new(
    counter: Any,
    original: list[BaseMessage],
    seen: int | None,
    fresh: bool,
    policy: GuardPolicy,
    window: int,
) -> tuple[Count, Prime | None, CallCounts | None]:
    """Count what is new in one batch, if ``counter`` can (``prime``).

    ``seen``: how many leading messages the guard read last call (None: none
    of them). A history that is all new and ``fresh`` (no prompt of its
    conversation kept) gets a first run of the passes: its rewrites join the
    batch and the call counts through ``CallCounts``. Returns the count for
    the call, the prime for the passes (None: nothing left to batch) and the
    ``CallCounts`` to close.
    """
    count: Count = counter.count_message
    prime = getattr(counter, "prime", None)
    if prime is None:
        return count, None, None
    if seen is None and fresh and policy.enabled:
        pairs: list[tuple[BaseMessage, BaseMessage]] = []
        calls = CallCounts(count)
        again = first_rewrites(original, policy, window, calls, pairs)
        calls.add(prime([*original, *again], pairs))
        return calls, None, calls
    prime(original if seen is None else original[seen:])
    return count, prime, None
