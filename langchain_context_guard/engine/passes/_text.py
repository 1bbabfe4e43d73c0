"""Text cutting shared by the truncation and compression passes."""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from .._messages import marker, memo_rewrite, text_of
from .._result_keys import TURN, Naming, pointer
from ._paged_reads import PagedRead

_MARKER = re.compile(
    r"\n\n\.\.\. \[[\d,]+ characters truncated; original ([\d,]+) characters"
    r"(?:; lines [\d,]+-[\d,]+ cut: [^\]\n;]*)?"
    r'(?:; full text: read_tool_result\("([^"\n]*)"\))?\] \.\.\.\n\n'
)
"""The marker ``truncate_text`` leaves (its original length, the lines a paged
read lost and how to read them, and its source)."""
MIN_PAGED_ROOM = 200
"""The head and tail a paged read's cut keeps at least, else its marker has no
note (a cap too small for both)."""


def truncate_text(
    text: str,
    max_chars: int,
    head_chars: int = 2_000,
    tail_chars: int = 2_000,
    source: str | None = None,
    original: int | None = None,
    paged: PagedRead | None = None,
) -> str:
    """Cut ``text`` longer than ``max_chars`` to its head and tail around a marker.

    The marker states how many characters were omitted and the original length
    (``original`` when ``text`` is itself a cut of a longer text), and with
    ``source`` (a tool call id) where the full text can be read back; with
    ``paged`` (``text`` is a paged file read), the lines cut and how to read
    them, when the cap leaves room for that. Text of at most ``max_chars``
    characters comes back unchanged, and the result is at most ``max_chars``
    long (head and tail shrink to make room for the marker), unless
    ``max_chars`` is shorter than the marker itself. A text cut before is cut
    again around its marker, never through it: the head and tail shrink, and
    the marker still gives the first original's length.
    """
    if head_chars < 0 or tail_chars < 0 or max_chars <= 0:
        raise ValueError(
            "max_chars must be positive and head_chars/tail_chars non-negative; "
            f"got max_chars={max_chars}, head_chars={head_chars}, "
            f"tail_chars={tail_chars}."
        )
    if head_chars + tail_chars >= max_chars:
        raise ValueError(
            f"head_chars + tail_chars ({head_chars + tail_chars}) must be below "
            f"max_chars ({max_chars}); lower head_chars/tail_chars."
        )
    if len(text) <= max_chars:
        return text
    found = list(_MARKER.finditer(text))
    if len(found) == 1 and _original(found[0]) >= len(text) - len(found[0][0]):
        return _recut(text, found[0], max_chars, head_chars, tail_chars, source)
    # The result never exceeds max_chars (so cutting again changes nothing): when
    # head + tail + marker would, head and tail shrink in proportion.
    size = max(original or 0, len(text))
    room = max_chars - len(_marker(size, size, source))
    if paged is not None and room - paged.room >= MIN_PAGED_ROOM:
        room -= paged.room
    else:
        paged = None
    if head_chars + tail_chars > room:
        share = head_chars / (head_chars + tail_chars)
        head_chars = max(int(room * share), 0)
        tail_chars = max(room - head_chars, 0)
    omitted = size - head_chars - tail_chars
    head = text[:head_chars]
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    note = paged.note(text, head_chars, tail_chars) if paged is not None else ""
    return f"{head}{_marker(omitted, size, source, note)}{tail}"


def _recut(
    text: str,
    mark: re.Match[str],
    max_chars: int,
    head_chars: int,
    tail_chars: int,
    source: str | None,
) -> str:
    """``truncate_text`` of a text cut before: its head and tail cut shorter."""
    original = _original(mark)
    source = source or mark[2]  # a paged read's note is not kept: its lines moved
    head, tail = text[: mark.start()], text[mark.end() :]
    room = max_chars - len(_marker(original, original, source))
    if head_chars + tail_chars > room:
        share = head_chars / (head_chars + tail_chars)
        head_chars = max(int(room * share), 0)
        tail_chars = max(room - head_chars, 0)
    head = head[:head_chars]
    tail = tail[max(len(tail) - tail_chars, 0) :] if tail_chars else ""
    omitted = original - len(head) - len(tail)
    return f"{head}{_marker(omitted, original, source)}{tail}"


def _original(mark: re.Match[str]) -> int:
    return int(mark[1].replace(",", ""))


_KEYED = re.compile(rf'; full text: read_tool_result\("#\d+(?:{re.escape(TURN)})?"\)')
_POINTING = frozenset({"truncated", "compressed", "superseded", "cleared"})


def repointed(message: BaseMessage, names: Naming) -> BaseMessage:
    """``message``, its marker naming its key in this history (memoised).

    A marker written in a history rewritten since (a hook in persist mode)
    names the result's place there, or its turn's (``turn_key``); the archive
    has moved that key on.
    """
    mark = marker(message)
    if (
        isinstance(names, bool)
        or not isinstance(message, (ToolMessage, AIMessage))
        or mark is None
        or mark.get("kind") not in _POINTING
        or 'read_tool_result("#' not in text_of(message.content)
    ):
        return message
    key = pointer(message, names)
    return memo_rewrite(message, ("repoint", key), lambda m: _repoint(m, key))


def _repoint(message: BaseMessage, key: str | None) -> BaseMessage:
    def sub(text: str) -> str:
        return _KEYED.sub(lambda _: where(key), text)

    content = message.content
    if isinstance(content, str):
        new: Any = sub(content)
    else:
        new = [
            {**b, "text": sub(str(b.get("text", "")))}
            if isinstance(b, dict) and b.get("type") == "text"
            else b
            for b in content
        ]
    return message if new == content else message.model_copy(update={"content": new})


def where(source: str | None) -> str:
    """The marker's pointer to the full text (nothing without a source)."""
    return f'; full text: read_tool_result("{source}")' if source else ""


def _marker(
    omitted: int, original: int, source: str | None = None, note: str = ""
) -> str:
    return (
        f"\n\n... [{omitted:,} characters truncated; original "
        f"{original:,} characters{note}{where(source)}] ...\n\n"
    )


def compress_lines(
    text: str,
    head_lines: int = 3,
    tail_lines: int = 2,
    max_line_chars: int = 240,
    source: str | None = None,
    what: str = "tool output",
    original: tuple[int, int] | None = None,
) -> str:
    """Keep the first and last lines of ``text`` around an omission marker.

    Kept lines longer than ``max_line_chars`` are cut too, so a result made of one
    huge line still shrinks. ``what`` names the text in the marker; with
    ``source`` (a tool call id) the marker says where the full text can be read back.
    ``original``: the characters and lines of the text ``text`` was cut from, so
    the marker states what it replaces, not the size of an earlier cut.
    """
    count = text.count("\n") + 1
    if count <= head_lines + tail_lines or head_lines < 0 or tail_lines < 0:
        lines = text.split("\n")
        keep_all = len(lines) <= head_lines + tail_lines
        head = lines if keep_all else lines[:head_lines]
        tail = [] if keep_all or not tail_lines else lines[-tail_lines:]
        omitted = 0 if keep_all else len(lines) - head_lines - tail_lines
    else:  # only the kept lines are split off (a long text has many)
        head, tail = _first_lines(text, head_lines), _last_lines(text, tail_lines)
        omitted = count - head_lines - tail_lines

    def cut(line: str) -> str:
        if len(line) <= max_line_chars:
            return line
        return line[:max_line_chars] + f" ...[{len(line) - max_line_chars:,} chars]"

    size = len(text)
    if original is not None and original[0] > size:
        size = original[0]
        omitted = max(original[1] - len(head) - len(tail), omitted)
    note = (
        f"[... {omitted:,} lines omitted, original {size:,} characters; "
        f"older {what} compressed by context guard{where(source)} ...]"
    )
    return "\n".join([*map(cut, head), note, *map(cut, tail)])


def _first_lines(text: str, n: int) -> list[str]:
    """Its first ``n`` lines (``split``'s) of a text of more than ``n`` lines."""
    end = -1
    for _ in range(n):
        end = text.find("\n", end + 1)
    return text[:end].split("\n") if n else []


def _last_lines(text: str, n: int) -> list[str]:
    """Its last ``n`` lines (none for 0) of a text of more than ``n`` lines."""
    start = len(text)
    for _ in range(n):
        start = text.rfind("\n", 0, start)
    return text[start + 1 :].split("\n") if n else []
