"""The needle benchmark: facts from earlier tool outputs, asked again later.

A needle is a short answer found in a tool output by a fixed pattern, never
picked by hand: a file path with its line (a traceback frame or ``grep -n``
hit), a numbered source line (``nl``/``cat -n``/``grep -n`` output), an error
message, or a printed value (``name = 3``, ``count: 12``). Each tool output
gives at most one needle of each kind: the middle one of its matches, so the
head and tail a truncation keeps are not favoured. Each needle is asked at the
calls ``DISTANCES`` calls after the first call that saw it (when the transcript
has them), and counts as answered when its text is still visible verbatim in a
message sent from the history (the library's own notes do not count).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import BaseMessage, ToolMessage

from ..engine import text_of

DISTANCES = (3, 10, 30)
"""A needle is asked this many calls after the first call that saw it."""
MAX_ANSWER = 160
"""Longest answer, in characters (a longer line is not a short fact)."""

_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("file_line", re.compile(r'File "[^"\n]+", line \d+')),
    ("file_line", re.compile(r"^[\w./-]+\.\w+:\d+:", re.MULTILINE)),
    ("line_number", re.compile(r"^ *\d+(?:\t|:)[^\n]*\S[^\n]*$", re.MULTILINE)),
    (
        "error",
        re.compile(r"^[ \t]*[\w.]*(?:Error|Exception)\b:[^\n]*\S$", re.MULTILINE),
    ),
    (
        "value",
        re.compile(r"^[ \t]*[A-Za-z_][\w.]*\s*(?:=|:)\s*[^\n]*\d[^\n]*$", re.MULTILINE),
    ),
)


@dataclass(frozen=True)
class Needle:
    """One fact: its kind, its verbatim answer and the message it came from.

    ``distance``: how many calls after the first call that saw it it is asked
    (0 until it is planned).
    """

    kind: str
    answer: str
    source: int
    distance: int = 0


def needles_in(text: str, source: int) -> list[Needle]:
    """The needles of one tool output (at most one per kind)."""
    found: dict[str, list[str]] = {}
    taken: set[str] = set()  # a line matched by an earlier kind is not one again
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            answer = match.group(0).strip()
            if answer in taken or not 8 <= len(answer) <= MAX_ANSWER:
                continue
            if any(c.isalpha() for c in answer):
                found.setdefault(kind, []).append(answer)
        taken.update(found.get(kind, ()))
    return [Needle(kind, hits[len(hits) // 2], source) for kind, hits in found.items()]


def ask_plan(
    messages: Sequence[BaseMessage], calls: Sequence[int]
) -> list[list[Needle]]:
    """For each call (its history length in ``calls``), the needles asked there."""
    asked: list[list[Needle]] = [[] for _ in calls]
    for i, message in enumerate(messages):
        if not isinstance(message, ToolMessage):
            continue
        first = next((n for n, k in enumerate(calls) if k > i), None)
        if first is None:
            continue
        found = needles_in(text_of(message.content), i)
        for distance in DISTANCES:
            if first + distance < len(calls):
                asked[first + distance] += [
                    replace(n, distance=distance) for n in found
                ]
    return asked
