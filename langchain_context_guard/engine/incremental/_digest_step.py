"""The digest pass as a step that can grow with the history (``_steps``).

While the trim's cut stays put, the digest before the kept turns stays too and
the step grows with the new messages; when the cut moves, the digest of the
dropped turns is built afresh (``_digest.insert_digest``).
"""

from __future__ import annotations

from collections.abc import Callable

from langchain_core.messages import BaseMessage

from .._events import NO_EDITS, Edits
from .._messages import label
from ..passes._digest import insert_digest
from ._steps import NONE, Step, grown, whole
from ._trim_step import TrimState


def digest_step(
    trim: Step,
    *,
    max_tokens: int,
    count: Callable[[BaseMessage], int],
    call_chars: int,
    sources: bool = False,
    originals: Callable[[], dict[str, BaseMessage]],
    prev: Step | None = None,
) -> Step:
    """The digest put where ``trim`` dropped turns (none: its result unchanged).

    Grows ``prev`` while the cut stays put. The dropped messages are read as the
    caller wrote them when ``originals`` (by id) has them: compression already
    shrank old results in ``trim``'s input. ``sources``: calls name their ids
    (``GuardPolicy.archived_results``).
    """
    source = trim.result
    if prev is not None and trim.grown:
        return grown(prev, source, source[len(prev.source) :], NO_EDITS, 0, None)
    state = trim.state
    gone = (
        sorted(i for unit in state.plan.units[: state.dropped] for i in unit)
        if isinstance(state, TrimState) and max_tokens > 0
        else []
    )
    if not gone:
        return Step("digest", source, source, NO_EDITS, 0, NONE, None)
    by_id = originals()
    dropped = [
        by_id.get(m.id, m) if m.id else m for m in (trim.source[i] for i in gone)
    ]
    at = gone[0]
    out = insert_digest(
        source,
        dropped,
        at,
        max_tokens=max_tokens,
        count=count,
        call_chars=call_chars,
        sources=sources,
    )
    if out is source:
        return Step("digest", source, source, NO_EDITS, 0, NONE, None)
    digest = out[at]
    edits = Edits(added=(label(digest, at),))
    return whole("digest", source, out, edits, count(digest), None)
