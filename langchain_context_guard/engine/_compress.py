"""Pass 3: compress old tool results in batches, keeping the newest whole."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ._messages import marker, memo_rewrite, text_of, with_marker
from ._text import compress_lines


def compress_old_tool_results(
    messages: Sequence[BaseMessage],
    *,
    keep_recent: int = 6,
    min_chars: int = 500,
    head_lines: int = 3,
    tail_lines: int = 2,
    batch: int = 8,
    name_source: bool = False,
) -> list[BaseMessage]:
    """Shrink tool results older than the newest ``keep_recent`` to a few lines.

    Results over ``min_chars`` characters become their first ``head_lines`` and last
    ``tail_lines`` lines plus a marker with the omitted lines and original size;
    their tool calls stay as they are. The boundary advances only in steps of
    ``batch`` results, so an old message is rewritten once per ``batch`` new
    results rather than on every call: each rewrite invalidates the provider's
    prompt cache from that message on. ``name_source``: the marker names the
    result's tool call id, to read the full text back (it is archived).
    """
    results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
    upto = compress_boundary(len(results), keep_recent, batch)
    out = list(messages)
    changed = False
    for i in results[:upto]:
        new = compress_message(out[i], min_chars, head_lines, tail_lines, name_source)
        if new is not out[i]:
            out[i] = new
            changed = True
    if changed:
        return out
    return messages if isinstance(messages, list) else out


def compress_boundary(results: int, keep_recent: int, batch: int) -> int:
    """How many of the oldest ``results`` tool results are due for compression."""
    old = results - keep_recent
    return (old // batch) * batch if old > 0 else 0


def compress_message(
    message: BaseMessage,
    min_chars: int,
    head_lines: int,
    tail_lines: int,
    name_source: bool = False,
) -> BaseMessage:
    """A tool result as compression leaves it (memoised; marked ones stay)."""
    mark = marker(message)
    if mark is not None and mark.get("kind") in {"compressed", "synthetic_result"}:
        return message
    return memo_rewrite(
        message,
        ("compress", min_chars, head_lines, tail_lines, name_source),
        lambda m: _compress(m, min_chars, head_lines, tail_lines, name_source),
    )


def _compress(
    message: BaseMessage,
    min_chars: int,
    head_lines: int,
    tail_lines: int,
    name_source: bool = False,
) -> BaseMessage:
    text = text_of(message.content)
    if len(text) <= min_chars or (not isinstance(message.content, str) and not text):
        return message
    source = (
        message.tool_call_id
        if name_source and isinstance(message, ToolMessage)
        else None
    )
    short = compress_lines(text, head_lines, tail_lines, source=source)
    if len(short) >= len(text):
        return message
    return with_marker(message, "compressed", content=short, original_chars=len(text))
