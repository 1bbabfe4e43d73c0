"""What ``ContextGuard.prepare`` does to a history: the passes, in order, and why.

Each pass is a pure ``list[BaseMessage] -> list[BaseMessage]`` function exported
from the package; ``prepare`` applies them in this order:

1. ``sanitize``: ``sanitize_messages`` drops empty and malformed messages and
   invalid tool calls; they must go before anything counts them.
2. ``repair``: ``repair_tool_pairs``, so the passes below see the history's final
   shape (their choices, e.g. compression batches counted in results, then come
   out the same when the output is prepared again: ``prepare`` is idempotent).
3. ``truncate``: ``truncate_tool_results`` keeps the head and tail of huge tool
   outputs; cheap, and it touches one message at a time.
4. ``compress``: ``compress_old_tool_results`` shrinks old tool results (the
   newest stay whole), with the prose of the assistant messages that called them
   (their tool calls stay whole), before trimming has to drop whole turns.
5. ``strip_thinking``: ``strip_old_thinking``; old reasoning is dead weight once
   answered.
6. ``trim``: ``trim_to_budget`` drops the oldest whole turns, only if the cheaper
   passes were not enough; it never splits a tool call from its results and keeps
   the system message and the first user message. Before it drops an answer, it
   strips the reasoning ``strip_thinking`` left on the answers it keeps.
7. ``digest``: where turns were trimmed, one marked user message notes the tool
   calls they made and the names they mentioned (never counted as content kept).
8. ``compress`` again: its batches count results, so once trimming removed some,
   the count of what is sent decides (as it will when this output is prepared
   again); between moves of the cut it changes nothing.
9. ``repair`` again: after every removal, so no call or result is orphaned.
10. ``hygiene``: ``enforce_provider_hygiene`` last, on the final shape (a user
    message first, no empty tool results).

How it is made fast is kept out of this list: ``_pipeline.Run`` runs the same
passes as steps (``_stages``, ``_trim_step``) that grow the previous call's
steps when the history only grew, and ``_stable`` re-sends the previous prompt
unchanged while it fits. Both give what the plain passes give
(``tests/engine/test_incremental.py``).
"""

from __future__ import annotations

from ._events import EventKind

PASSES: tuple[EventKind, ...] = (
    "sanitize",
    "repair",
    "truncate",
    "compress",
    "strip_thinking",
    "trim",
    "digest",
    "compress",
    "repair",
    "hygiene",
)
"""The order in which ``prepare`` applies the passes (see the module docstring)."""
