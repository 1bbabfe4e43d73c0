"""What the history's replies were produced behind: the prompts the guard sent.

Signed reasoning is held to the prompt that produced it (``_bound_thinking``).
The guard keeps, per conversation, its last prompt as the passes left it before
hygiene (``Sent.shaped``); ``produced_prompt`` turns that record and a new
history into the prompt the passes' output is compared with. A history whose
head was rewritten (a summary in place of old turns) starts a new conversation
key, so its record is also found by the last message it ended with
(``rewritten_record``).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from ..passes._hygiene import first_turn, history_start
from ..passes._provider_compaction import drop_before_compaction, latest_compaction
from ..passes._sanitize import sanitize_messages
from ..tokens._counters import content_key
from ._record import CallKey
from ._run import Run
from ._stable_prefix import Sent, conversation, open_results
from ._steps import Step

LOOK_BACK = 64
"""Messages from the end of a history searched for the last one a record ended at."""

Key = tuple[Any, ...]


def produced_prompt(
    sent: Sent | None, history: list[BaseMessage]
) -> list[BaseMessage] | None:
    """The prompt ``history``'s replies were produced behind, where the guard knows it.

    What it sent last for this conversation, before hygiene, followed by the
    messages ``history`` added to that call's history (as read: sanitised,
    from a new compaction block on). A history rewritten since (a summary in
    place of old turns, a shorter one) is held to what was sent alone. None
    where the guard knows nothing of it (no record; a history that grows what
    was sent, stored by the caller): the history as read is then the best
    evidence of what was sent (``_bound_thinking``).
    """
    if sent is None or sent.shaped is None:
        return None
    tail = sent.tail(history)
    if tail is None:
        return sent.shaped  # rewritten: replies after the rewrite are stale
    if len(history) - len(tail) != sent.size:
        return None  # the output, stored by the caller, grown
    new = sanitize_messages(tail)
    prompt = [*sent.shaped, *new]
    if first_turn(sent.shaped) is None:  # no turn sent: hygiene's placeholder comes
        prompt.insert(len(sent.shaped), history_start(False))
    compacted = latest_compaction(new) is not None
    return drop_before_compaction(prompt) if compacted else prompt


def produced_for(
    sent: Sent | None, history: list[BaseMessage], unknown: bool
) -> list[BaseMessage] | None:
    """``produced_prompt``, or no prompt at all for a conversation pruned out of sight.

    ``unknown``: a handover record says another guard pruned it in a way this
    one cannot reproduce (``_handover``); with no record of its own, no signed
    block has a known prefix (an empty prompt: every one of them is stale).
    """
    if sent is None and unknown:
        return []
    return produced_prompt(sent, history)


def shaped_output(steps: Sequence[Step], sent: list[BaseMessage]) -> list[BaseMessage]:
    """``sent`` as the passes left it before hygiene.

    With the stand-in results closing open calls: they are not kept for the
    next call (the real ones may follow), but the reply to this prompt was
    produced behind them.
    """
    return steps[-1].source if steps and steps[-1].kind == "hygiene" else sent


def pruned_record(
    key: CallKey,
    given: list[BaseMessage],
    sent: list[BaseMessage],
    run: Run,
    *,
    size: int,
    cold: bool,
    count: Callable[[BaseMessage], int],
) -> Sent:
    """The record of a pruning ``run`` that sent ``sent``.

    The stand-in results closing open calls are sent, not kept: the real ones
    will follow. ``given``: the history as the caller gave it.
    """
    kept = list(sent)
    closing = open_results(kept)
    if closing:
        del kept[-closing:]
    body = run.body - sum(map(count, sent[len(kept) :]))
    shaped = shaped_output(run.steps, sent)
    return Sent.of(key, given, kept, body, size=size, cold=cold, shaped=shaped)


def keep_sent(
    stables: MutableMapping[Key, Sent],
    ends: MutableMapping[Key, Key],
    sent: Sent,
    *,
    stored: bool = False,
) -> None:
    """Keep ``sent`` as its conversation's record, findable by its last message.

    ``stored``: the caller stores the output (``prepare(persist=True)``) and
    comes back with a history that starts as it does, so the record is also
    kept under the output's key when a pruning rewrote the first two messages
    (no system prompt, and the first answer cut down): its prompt is then
    re-sent while it fits, not pruned afresh as a new conversation's.
    """
    if not sent.source or not sent.size:
        return
    key = conversation(sent.source)
    stables[key] = sent
    ends[_end(sent.source[sent.size - 1])] = key
    if stored and sent.output:
        output = conversation(sent.output)
        if output != key:
            stables[output] = sent


def rewritten_record(
    stables: MutableMapping[Key, Sent],
    ends: MutableMapping[Key, Key],
    history: list[BaseMessage],
) -> Sent | None:
    """The record of a conversation ``history`` continues under another key.

    Its head rewritten (compaction), ``history`` still holds the last message
    an earlier call's history ended with, among its last ``LOOK_BACK``.
    """
    for message in reversed(history[-LOOK_BACK:]):
        key = ends.get(_end(message))
        if key is not None:
            return stables.get(key)
    return None


def _end(message: BaseMessage) -> Key:
    return (message.id, content_key(message))
