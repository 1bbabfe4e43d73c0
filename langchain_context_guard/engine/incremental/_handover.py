"""Handing a conversation to another process: many workers, one prompt.

Behind LangGraph Server or any pool of workers, the steps of one thread run in
whichever process is free, or after a restart. What the guard keeps in memory
to send the same prompt on the next step (``_stable_prefix``: the previous prompt,
extended while it fits) must then travel with the thread. It is small and
derived: ``ContextGuard.export_state`` gives, after a ``prepare``, the length of
the history last pruned afresh (``base``; the prompt is that prune plus the
later messages, each through the per-message passes) and our count of the
prompt (``sent``, for usage anchoring). The adapters store it in the reply's
``response_metadata``; ``ContextGuard.restore_state`` takes the records back and,
when the guard does not hold that prompt, rebuilds it by pruning the history
up to ``base`` again: the passes are deterministic and the anchors' counts are
restored first, so the rebuilt prompt is byte-identical. With
``cache_ttl_seconds`` the record also says when the prompt was sent (``at``) and
whether the prune at ``base`` was taken because the cache had expired
(``cold``): the guard that takes the thread over knows when its cache was last
warmed, and rebuilds a cold prune as deep.

A record also names the policy and counter that pruned (``fp``) and the message
its ``base`` ended at (``head``). A guard whose own differ does not rebuild that
prompt: it would get another one, and trust signed reasoning the model never
saw behind it (a worker with other settings; a history that
``CompactionMiddleware`` rewrote since, so ``base`` points elsewhere). The
conversation is then marked as pruned out of sight (``ContextGuard._unknown``):
signed reasoning in it is held to no known prompt, so it goes (but for a
running tool loop's final turn, ``_bound_thinking``) until the guard sends its
own prompt.

Records come back from checkpoints and replies that anyone may have edited,
truncated or written with another version: they are untrusted input. Each is
checked against the schema below (``checked_records``) and one that does not
match is ignored with a debug log line, so the prompt is pruned afresh; a
record never raises and never inflates a count.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import threading
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Protocol

from langchain_core.messages import AIMessage, BaseMessage

from .._cache_clock import CacheClock
from .._policy import GuardPolicy
from ..tokens._anchor import CALIBRATION_RANGE, anchor_tokens, sent_key
from ..tokens._counters import TokenCounter
from ._stable_prefix import Sent, conversation

STATE_KEY = "context_guard"
"""Where the adapters keep the record in a reply's ``response_metadata``."""
VERSION = 3
"""The record's schema: ``{"v": 3, "sent": [tokens, whole], "base": index,
"ratio": provider/our count, "at": seconds, "cold": bool, "fp": hex, "head":
hex}``, every key but ``v`` optional. Version 2 has no ``fp`` and ``head``,
version 1 no ``at`` and ``cold`` either; a record is written at the lowest
version its keys allow (a record without ``v`` is read as version 1, as written
before the key existed)."""
MAX_TOKENS = 100_000_000
"""No prompt's count is larger: ten times the largest context window."""

_KEYS = {
    1: frozenset({"v", "sent", "base", "ratio"}),
    2: frozenset({"v", "sent", "base", "ratio", "at", "cold"}),
    3: frozenset({"v", "sent", "base", "ratio", "at", "cold", "fp", "head"}),
}
_HEX = re.compile(r"^[0-9a-f]{16}$")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def policy_fingerprint(policy: GuardPolicy, counter: TokenCounter) -> str:
    """What decides a pruning's output besides the history: settings and counter."""
    name = getattr(counter, "name", None) or type(counter).__name__
    settings = policy.model_dump_json()
    filled = sorted(policy.model_fields_set - policy.chosen_fields)
    if filled:  # with_archive's: they give way to the interactive settings
        settings += f"|filled:{','.join(filled)}"
    return _digest(f"{settings}|{name}")


def message_key(message: BaseMessage) -> str:
    """A stable key of one message (the same in every process)."""
    body = json.dumps(
        [message.type, message.id, message.content], sort_keys=True, default=repr
    )
    return _digest(body)


logger = logging.getLogger("langchain_context_guard")


def record(
    sent: tuple[int, bool] | None,
    base: int | None,
    ratio: float | None,
    at: float | None = None,
    cold: bool = False,
    fp: str | None = None,
    head: str | None = None,
) -> dict[str, Any]:
    """The JSON record of one prepared prompt (keys only for what is known).

    Empty (not even ``v``) when nothing is known.

    ``ratio`` is the provider/our count ratio the guard carries after it: it
    decides between readings of the next reply's usage (``_anchor.make_gauge``).
    ``at``: when the prompt was sent; ``cold``: the prune at ``base`` was taken
    because the cache had expired. ``fp`` and ``head``: the pruning's
    fingerprint and the key of the message at ``base - 1`` (the module docstring).
    """
    state: dict[str, Any] = {}
    if sent is not None:
        state["sent"] = [sent[0], sent[1]]
    if base is not None:
        state["base"] = base
    if ratio is not None:
        state["ratio"] = ratio
    if at is not None:
        state["at"] = at
    if cold and base is not None:
        state["cold"] = True
    if base is not None and fp is not None and head is not None:
        state["fp"], state["head"] = fp, head
    version = next(v for v, keys in _KEYS.items() if {"v", *state} <= keys)
    return {"v": version, **state} if state else state


Records = dict[int, Mapping[str, Any]]


def _index(value: object, top: int) -> bool:
    """An int (not a bool) in ``1..top``."""
    return type(value) is int and 0 < value <= top


def problem(state: object, at: int) -> str | None:
    """What is wrong with the record of the prompt before index ``at``, if anything."""
    if not isinstance(state, Mapping):
        return f"a {type(state).__name__}, not a dict"
    version = state.get("v", 1)
    keys = _KEYS.get(version) if type(version) is int else None
    if keys is None:
        return f"version {version!r}, not one of {sorted(_KEYS)}"
    if not set(state) <= keys:
        return f"unknown keys {sorted(map(str, set(state) - keys))}"
    sent = state.get("sent")
    if sent is not None and not (
        isinstance(sent, list | tuple)
        and len(sent) == 2
        and _index(sent[0], MAX_TOKENS)
        and type(sent[1]) is bool
    ):
        return "'sent' is not [tokens, whole]"
    base = state.get("base")
    if base is not None and not _index(base, at):
        return f"'base' is not an index up to {at}"
    ratio = state.get("ratio")
    low, high = CALIBRATION_RANGE
    if ratio is not None and not (
        type(ratio) in {int, float} and math.isfinite(ratio) and low <= ratio <= high
    ):
        return f"'ratio' is not a number from {low} to {high}"
    sent_at = state.get("at")
    if sent_at is not None and not (
        type(sent_at) in {int, float} and math.isfinite(sent_at)
    ):
        return "'at' is not a time in seconds"
    cold = state.get("cold")
    if cold is not None and (type(cold) is not bool or base is None):
        return "'cold' is not a bool beside a 'base'"
    for key in ("fp", "head"):
        value = state.get(key)
        if value is not None and not (isinstance(value, str) and _HEX.match(value)):
            return f"'{key}' is not 16 hex digits"
    return None


def checked_records(states: object, size: int) -> Records:
    """The well-formed records of ``states`` for a history of ``size`` messages.

    Keys must be reply indexes in ``1..size`` and records must match the schema;
    anything else is left out with a debug log line (it only costs a fresh prune).
    """
    if not isinstance(states, Mapping):
        if states is not None:
            logger.debug("Context guard: handover records ignored (not a dict)")
        return {}
    found: Records = {}
    for at, state in states.items():
        why = (
            problem(state, at)
            if _index(at, size)
            else f"index {at!r} outside 1..{size}"
        )
        if why is None:
            found[at] = state
        else:
            logger.debug("Context guard: handover record ignored (%s)", why)
    return found


def read_record(message: BaseMessage) -> dict[str, Any] | None:
    """The record a reply carries in its ``response_metadata``, if any."""
    if isinstance(message, AIMessage):
        state = message.response_metadata.get(STATE_KEY)
        if isinstance(state, dict):
            return state
    return None


def _walk(
    messages: Sequence[BaseMessage],
    end: int,
    read: Callable[[BaseMessage], Mapping[str, Any] | None],
    found: Records,
) -> None:
    """Collect records walking back from ``end`` until past one and a usage."""
    record_seen = usage_seen = False
    for k in range(end - 1, -1, -1):
        message = messages[k]
        state = read(message)
        if state is not None:
            found[k] = state
            record_seen = True
        usage_seen = usage_seen or anchor_tokens(message) is not None
        if record_seen and usage_seen:
            return


def needed_records(
    messages: Sequence[BaseMessage],
    read: Callable[[BaseMessage], Mapping[str, Any] | None],
) -> Records:
    """The records ``restore_state`` uses, read from the end: O(new messages).

    ``restore_state`` uses the latest record (its ``sent``, ``base`` and
    ``ratio``; the last usage anchors on it) and, to rebuild the prompt, the
    last record before that ``base`` (and the last usage before it). Walking
    back from the end and from ``base`` reads only the messages since those,
    not the whole history. ``read`` gives a message's record or None.
    """
    found: Records = {}
    _walk(messages, len(messages), read, found)
    latest = latest_base(found)
    if latest is not None:
        _walk(messages, latest[1], read, found)
    return found


def keep_records(states: Records, at: int, state: Mapping[str, Any]) -> Records:
    """Add ``state`` (the prompt before index ``at``), keeping what is needed.

    What ``needed_records`` would find: the new record and the last one
    before its ``base`` (a record per reply, as an adapter writes them).
    """
    kept: Records = {i: s for i, s in states.items() if i < at}
    kept[at] = state
    base = state.get("base")
    floor = base if isinstance(base, int) and 0 < base <= at else at
    prior = max((i for i in kept if i < floor), default=None)
    return {i: s for i, s in kept.items() if i == at or i == prior}


def ratio_before(states: Mapping[int, Mapping[str, Any]], at: int) -> float | None:
    """The ratio carried after the last recorded prompt before index ``at``."""
    prior = max((i for i in states if i < at), default=None)
    return None if prior is None else states[prior].get("ratio")


def set_ratio(
    ratios: MutableMapping[str, float], name: str, ratio: float | None
) -> None:
    """Carry ``ratio`` for ``name`` (or none)."""
    if ratio is None:
        ratios.pop(name, None)
    else:
        ratios[name] = float(ratio)


def sent_counts(
    original: list[BaseMessage],
    states: Mapping[int, Mapping[str, Any]],
    key_of: Callable[[BaseMessage, int], tuple[Any, ...]],
) -> list[tuple[tuple[Any, ...], tuple[int, bool]]]:
    """Our counts of the prompts before each recorded reply, keyed as ``_sent``."""
    out: list[tuple[tuple[Any, ...], tuple[int, bool]]] = []
    for at, state in states.items():
        sent = state.get("sent")
        if sent is not None and 0 < at <= len(original) and original[at - 1].id:
            out.append(
                (key_of(original[at - 1], at - 1), (int(sent[0]), bool(sent[1])))
            )
    return out


def latest_base(states: Mapping[int, Mapping[str, Any]]) -> tuple[int, int] | None:
    """The latest reply's index and the ``base`` its prompt extended, if any."""
    last = max(states, default=0)
    base = states[last].get("base") if last else None
    if not isinstance(base, int) or not 0 < base <= last:
        return None
    return last, base


def rebuildable(
    guard: _Guard, original: list[BaseMessage], state: Mapping[str, Any], base: int
) -> bool:
    """Whether pruning ``original[:base]`` again gives the prompt ``state`` names.

    Not when the record was pruned with another fingerprint, or its ``base``
    ended at another message (the history was rewritten since). A record
    without them (an earlier release's) is taken as it was.
    """
    fp, head = state.get("fp"), state.get("head")
    if fp is not None and fp != policy_fingerprint(guard.policy, guard.counter):
        return False
    return head is None or head == message_key(original[base - 1])


def stale(mine: Sent | None, original: list[BaseMessage], last: int, base: int) -> bool:
    """Whether the prompt a guard holds is not the one the records describe."""
    if mine is None or mine.base != base:
        return True
    return mine.tail(original[:last]) is None


class _Guard(Protocol):
    """What the handover needs of a ``ContextGuard``."""

    @property
    def policy(self) -> GuardPolicy: ...
    @property
    def counter(self) -> TokenCounter: ...
    @property
    def _lock(self) -> threading.Lock: ...
    @property
    def _sent(self) -> MutableMapping[tuple[Any, ...], tuple[int, bool]]: ...
    @property
    def _stables(self) -> MutableMapping[tuple[Any, ...], Sent]: ...
    @property
    def _ratios(self) -> MutableMapping[str, float]: ...
    @property
    def _clock(self) -> CacheClock: ...
    @property
    def _unknown(self) -> MutableMapping[tuple[Any, ...], bool]: ...

    def _name(self, model: Any) -> str: ...

    def _last_sent(self, original: list[BaseMessage]) -> Sent | None: ...

    @property
    def _calls(self) -> threading.RLock: ...

    def _prepare(
        self,
        messages: Any,
        tools: Sequence[Any] | None,
        model: Any,
        session_kind: str | None,
        now: float | None = None,
        cold: bool = False,
    ) -> Any: ...


def export_state(
    guard: _Guard, original: list[BaseMessage], model: Any
) -> dict[str, Any]:
    """``ContextGuard.export_state``: the record after ``prepare(original)``."""
    with guard._lock:
        at = len(original) - 1
        hit = original and guard._sent.get(sent_key(original[-1], guard.counter, at))
        sent = original and guard._stables.get(conversation(original))
    kept = guard.policy.stable_prefix and sent and sent.size == len(original)
    base = sent.base if sent and kept else None
    sent_at = guard._clock.last(conversation(original)) if original else None
    ratio = guard._ratios.get(guard._name(model))
    fp = policy_fingerprint(guard.policy, guard.counter)
    head = message_key(original[base - 1]) if base else None
    cold = bool(sent and sent.cold)
    return record(hit or None, base, ratio, sent_at, cold, fp=fp, head=head)


def restore_state(
    guard: _Guard,
    original: list[BaseMessage],
    states: Mapping[int, Mapping[str, Any]],
    tools: Sequence[Any] | None,
    model: Any,
) -> None:
    """``ContextGuard.restore_state``: take back records by their reply's index."""
    states = checked_records(states, len(original))
    counts = sent_counts(original, states, lambda m, at: sent_key(m, guard.counter, at))
    with guard._lock:
        for key, value in counts:
            guard._sent.setdefault(key, value)
    name, last = guard._name(model), max(states, default=0)
    latest = latest_base(states) if guard.policy.stable_prefix else None
    if latest and stale(guard._last_sent(original), original, *latest):
        with guard._lock:
            guard._stables.pop(conversation(original), None)
        if not rebuildable(guard, original, states[latest[0]], latest[1]):
            with guard._lock:  # pruned out of sight: no prompt to hold blocks to
                guard._unknown[conversation(original)] = True
        else:
            set_ratio(guard._ratios, name, ratio_before(states, latest[1]))
            cold = bool(states[latest[0]].get("cold"))
            with guard._calls:  # as ``prepare``, cold as the call that pruned
                guard._prepare(original[: latest[1]], tools, model, None, None, cold)
    if last:
        set_ratio(guard._ratios, name, states[last].get("ratio"))
        sent_at = states[last].get("at")
        if sent_at is not None:
            guard._clock.heard(conversation(original), float(sent_at))
