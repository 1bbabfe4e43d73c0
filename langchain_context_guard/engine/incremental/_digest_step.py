"""The digest pass as a step that can grow with the history (``_steps``).

While the trim's cut stays put, the digest before the kept turns stays too and
the step grows with the new messages; when the cut moves, the digest of the
dropped turns is built afresh (``passes._digest.digest_trimmed``), and so it
is when its room changed (the usage rescaled the count). A turns digest reads
the trim's input as the passes rewrote it: its step's state says where it began
(``Digested.read_from``), which ``_release`` does not let go of and ``_run``
checks against what it did let go of.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, label
from ..passes._digest import digest_trimmed, digest_turns
from ..passes._digest_turns import TurnsForm
from ..passes._trim import Trimmed
from ._steps import Step, grown, whole


@dataclass(frozen=True, slots=True)
class Digest:
    """What a digest step was built in: its room, and where a turns digest read.

    ``room``: the tokens it could take; ``read_from``: the first place of the
    trim's input a turns digest weighed (``Digested.read_from``; None: none).
    """

    room: int
    read_from: int | None = None


def read_from(step: Step) -> int | None:
    """Where the turns digest of a digest step began reading (None: nowhere)."""
    return step.state.read_from if isinstance(step.state, Digest) else None


def digest_step(
    trim: Step,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    call_chars: int,
    sources: bool = False,
    originals: Callable[[], dict[str, BaseMessage]],
    ordinals: Callable[[], Mapping[str, int]] | None = None,
    prev: Step | None = None,
    turns: Callable[[], TurnsForm | None] | None = None,
) -> Step:
    """``digest_trimmed`` after ``trim`` (none: its result unchanged).

    Grows ``prev`` while the cut and the room stay put. ``originals``: the
    caller's messages by id, ``ordinals`` their results' places (archived
    results) and ``turns`` the turns digest's form (``digest_form="turns"``),
    built only when turns were dropped.
    """
    source = trim.result
    built = prev.state if prev is not None else None
    if isinstance(built, Digest) and built.room == max_tokens and trim.grown:
        assert prev is not None
        tail = source[len(prev.source) :]
        return grown(prev, source, tail, NO_EDITS, 0, built)
    state = trim.state
    gone = state.gone if isinstance(state, Trimmed) and max_tokens > 0 else []
    if not gone:
        return Step("digest", source, source, NO_EDITS, 0, NONE, Digest(max_tokens))
    form = turns() if turns is not None else None
    began = None
    if form is not None:
        done = digest_turns(
            source, trim.source, gone, form, max_tokens=max_tokens, count=count
        )
        out, began = done.messages, done.read_from
    else:
        out = digest_trimmed(
            source,
            trim.source,
            gone,
            max_tokens=max_tokens,
            count=count,
            call_chars=call_chars,
            sources=sources,
            originals=originals(),
            ordinals=ordinals() if ordinals is not None else None,
        )
    built = Digest(max_tokens, began)
    if out is source:
        return Step("digest", source, source, NO_EDITS, 0, NONE, built)
    held = {id(m) for m in source}
    added = [(i, m) for i, m in enumerate(out) if id(m) not in held]
    edits = Edits(added=tuple(label(m, i) for i, m in added))
    delta = sum(count(m) for _, m in added)
    return whole("digest", source, out, edits, delta, built)
