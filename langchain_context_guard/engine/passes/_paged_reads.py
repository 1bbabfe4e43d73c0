"""The way back into a paged file read that truncation cut.

A paged read is a tool result whose rows, under a header line
``@@ lines A-B[ of T][ | ...] @@`` (deepagents' ``read_file``; notices may sit
above it), are lines A to B of a file, verbatim, and whose tool takes ``offset``
(lines to skip) and ``limit``. When truncation cuts the middle of one, its
marker says which lines went and the call that reads them:
``lines 24-71 cut: read_file(offset=23, limit=48) with the same file_path``.
Only numbers and the tool's name go into the marker, never the result's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEADER = re.compile(r"^@@ lines (\d+)-(\d+)(?: of \d+)?(?: \| [^\n]*)? @@$", re.M)


@dataclass(frozen=True)
class PagedRead:
    """Where a paged read's rows start in its text, and the file line of the first."""

    tool: str
    rows_at: int
    """The index in the text of the first row (after the header's newline)."""
    first_line: int
    last_line: int

    @property
    def room(self) -> int:
        """The longest ``note`` this read can have: its marker keeps room for it."""
        n = self.last_line
        return len(self._note(n, n, n, n))

    def note(self, text: str, head: int, tail: int) -> str:
        """The note for ``text`` cut to its ``head`` and ``tail`` characters.

        It names the rows neither keeps whole; empty when there are none.
        """
        if head < self.rows_at or len(text) - tail < self.rows_at:
            return ""  # the header itself was cut: no line numbers to trust
        first = text.count("\n", self.rows_at, head) + (text[head : head + 1] == "\n")
        start = len(text) - tail
        last = text.count("\n", self.rows_at, start) - (text[start - 1] == "\n")
        if last < first:
            return ""
        a, b = self.first_line + first, self.first_line + last
        return self._note(a, b, a - 1, b - a + 1)

    def _note(self, first: int, last: int, offset: int, limit: int) -> str:
        return (
            f"; lines {first}-{last} cut: {self.tool}(offset={offset}, "
            f"limit={limit}) with the same file_path reads them"
        )


def paged_read(tool: str | None, text: str) -> PagedRead | None:
    """``text`` as a paged read of ``tool``, or None when it is not one."""
    if tool is None or "@@ lines " not in text:
        return None
    found = _HEADER.search(text)
    if found is None:
        return None
    first, last = int(found[1]), int(found[2])
    if first < 1 or last < first:
        return None
    return PagedRead(tool, found.end() + 1, first, last)
