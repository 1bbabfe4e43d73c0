"""The digest pass as a step that can grow with the history (``_steps``).

While the trim's cut stays put, the digest before the kept turns stays too and
the step grows with the new messages; when the cut moves, the digest of the
dropped turns is built afresh (``passes._digest.digest_trimmed``). A turns
digest reads the trim's input as the passes rewrote it: its step's state is
the first place it read (``Digested.read_from``), which ``_release`` does not
let go of and ``_run`` checks against what it did let go of.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from langchain_core.messages import BaseMessage

from .._events import NO_EDITS, Edits
from .._messages import NONE, label
from ..passes._digest import digest_trimmed, digest_turns
from ..passes._digest_turns import TurnsForm
from ..passes._trim import Trimmed
from ._steps import Step, grown, whole


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

    Grows ``prev`` while the cut stays put. ``originals``: the caller's
    messages by id, ``ordinals`` their results' places (archived results) and
    ``turns`` the turns digest's form (``digest_form="turns"``), built only
    when turns were dropped.
    """
    source = trim.result
    if prev is not None and trim.grown:
        return grown(prev, source, source[len(prev.source) :], NO_EDITS, 0, prev.state)
    state = trim.state
    gone = state.gone if isinstance(state, Trimmed) and max_tokens > 0 else []
    if not gone:
        return Step("digest", source, source, NO_EDITS, 0, NONE, None)
    form = turns() if turns is not None else None
    read_from = None
    if form is not None:
        done = digest_turns(
            source, trim.source, gone, form, max_tokens=max_tokens, count=count
        )
        out, read_from = done.messages, done.read_from
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
    if out is source:
        return Step("digest", source, source, NO_EDITS, 0, NONE, read_from)
    held = {id(m) for m in source}
    added = [(i, m) for i, m in enumerate(out) if id(m) not in held]
    edits = Edits(added=tuple(label(m, i) for i, m in added))
    delta = sum(count(m) for _, m in added)
    return whole("digest", source, out, edits, delta, read_from)
