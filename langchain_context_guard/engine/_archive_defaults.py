"""What an archive changes in a policy that leaves it unset (``with_archive``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ARCHIVE_DEFAULTS: Mapping[str, Any] = {
    "digest": True,
    "digest_share": 0.01,
    "digest_call_chars": 40,
    "prune_to": 0.6,
    "compress_min_chars": 1_000,
}
"""What an archive changes in a policy that leaves it unset (``with_archive``).

The digest, small (1% of the budget, 40 characters a call), so trimmed turns
leave their results' keys (``#1-#140``) and nothing cut is out of reach. A
pruning keeps at most 0.6 of the budget, not 0.7: what it cuts is read back for
one tool call, so a deeper cut that re-sends the prompt less often costs less.
Results under 1,000 characters stay whole, not 500: a marker with its pointer
leaves little to save on a short one. Replay at 16k (BENCHMARKS.md, recoverable
needles): on the 42 bash transcripts 0.69x billed against 0.71x (on each half
less), needles sent 83.2% against 81.3%, content evidence 97.9% against 98.5%.
A policy whose digest is the turns (``digest_form="turns"``) keeps its own
``digest_share`` and ``digest_call_chars``: 1% of the budget holds a turn or two,
and a line of keys before the turns names every trimmed result anyway.
These count as unset for ``interactive_tuning``: once a person replies, the
policy takes ``INTERACTIVE_ARCHIVED`` (the turns digest in 0.45 of the budget,
a pruning keeping 0.2 besides, the newest 4 results whole) and the rest go back
to their defaults (results from 500 characters are compressed).
"""
NOTE_ONLY = ("digest_share", "digest_call_chars")
"""``ARCHIVE_DEFAULTS`` that size the note: a turns digest keeps its own."""
