"""The order of the passes, as ``_run.Run`` steps through them.

The order and the reason for it are written once, in the docstring of
``_reference.reference_prune`` (the plain passes, called in order: the
specification of ``prepare``). ``PASSES`` names the same sequence for the
incremental machinery, which runs each pass as a step that can grow with the
history; ``tests/engine/test_reference.py`` holds its output equal to the
reference's.
"""

from __future__ import annotations

from .._events import EventKind

PASSES: tuple[EventKind, ...] = (
    "sanitize",
    "provider_compaction",
    "repair",
    "truncate",
    "compress",
    "strip_thinking",
    "trim",
    "digest",
    "compress",
    "repair",
    "bound_thinking",
    "hygiene",
)
"""The order in which ``prepare`` applies the passes (see the module docstring)."""

APPENDED: tuple[EventKind, ...] = ("sanitize", "truncate", "hygiene")
"""The passes each new message goes through while the previous prompt is re-sent
(``_reuse``): those that treat one message alone. A new tool call's result is
joined to it (``_stable_prefix.append``, the repair of what is new); anything
more (compress, strip thinking, trim) waits for the next pruning."""
