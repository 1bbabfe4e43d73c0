"""A host summarizer's cut into the stored messages, cleared when we rewrite them.

deepagents' summarization leaves every message in the state and records where
its summary ends (``_summarization_event``: the summary and a cutoff index);
each model call then sends that summary and the messages from the index on. A
middleware that rewrites the stored messages (``CompactionMiddleware``,
``ContextGuardMiddleware(persist=True)``) shortens the list under that index,
and the host would send its old summary alone: no task, no results. The rewrite
is made from the whole stored history, which the host's summary only stands
for, so it clears the host's record with it: the host sends the rewritten
messages as they are, and its next summary cuts them afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

HOST_CUTOFFS = ("_summarization_event",)
"""State keys where a host summarizer records an index into the messages."""


def clear_host_cutoffs(
    state: Mapping[str, Any], update: dict[str, Any] | None
) -> dict[str, Any] | None:
    """``update`` (a rewrite of the messages) that also clears the host's cutoffs.

    An empty or ``None`` update rewrites nothing and is returned as it is.
    """
    if not update:
        return update
    stale = {key: None for key in HOST_CUTOFFS if state.get(key) is not None}
    return {**update, **stale} if stale else update
