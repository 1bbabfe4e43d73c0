"""The archive: messages removed by compaction, kept in a LangGraph ``BaseStore``.

One item per removed message under ``(ARCHIVE_NS, thread_id, "archive")``, keyed by
the message id; ``recall_messages`` searches them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage, message_to_dict
from langgraph.store.base import BaseStore, Item, PutOp

from ..engine import CompactionError, is_summary
from ._summary_prompt import serialize

ARCHIVE_NS = "context_guard"


def archive_namespace(thread_id: str | None) -> tuple[str, ...]:
    """Where a thread's removed messages are archived."""
    return (ARCHIVE_NS, thread_id or "default", "archive")


def archive_ops(
    removed: Sequence[BaseMessage], *, number: int, thread_id: str | None
) -> list[PutOp]:
    """One put per message removed by compaction ``number``."""
    ns = archive_namespace(thread_id)
    ops = []
    for i, m in enumerate(removed):
        value = {
            "id": m.id,
            "type": m.type,
            "name": m.name,
            "summary": is_summary(m),
            "text": serialize([m], max_chars=1_000_000),
            "compaction": number,
            "position": i,
            "message": message_to_dict(m),
        }
        ops.append(PutOp(ns, m.id or f"compaction-{number}-{i}", value))
    return ops


def archive(store: BaseStore, ops: list[PutOp]) -> None:
    """Write ``ops``; raises ``CompactionError`` (``archive_failed``)."""
    try:
        store.batch(ops)
    except Exception as exc:
        raise _archive_error(exc) from exc


async def aarchive(store: BaseStore, ops: list[PutOp]) -> None:
    """Async ``archive``."""
    try:
        await store.abatch(ops)
    except Exception as exc:
        raise _archive_error(exc) from exc


def _archive_error(exc: Exception) -> CompactionError:
    return CompactionError(
        f"Archiving the removed messages failed: {exc!r}.",
        reason="archive_failed",
        hint="history was left unchanged; check the store.",
    )


def recall_messages(
    store: BaseStore, query: str, *, thread_id: str | None = None, limit: int = 5
) -> list[Item]:
    """Archived messages of a thread that match ``query``, best first.

    Uses the store's semantic index when it has one; else ranks exact phrase
    matches first, then by how many query words occur, real messages before
    earlier summaries, newer compactions first.
    """
    ns = archive_namespace(thread_id)
    hits = store.search(ns, query=query, limit=limit)
    if hits and all(getattr(h, "score", None) is not None for h in hits):
        return list(hits)
    phrase = query.lower().strip()
    words = set(re.findall(r"\w+", phrase))
    ranked: list[tuple[tuple[int, int, int, int], Item]] = []
    offset = 0
    while True:
        page = store.search(ns, limit=100, offset=offset)
        for item in page:
            text = str(item.value.get("text", "")).lower()
            found = sum(w in text for w in words)
            if found:
                rank = (
                    int(bool(phrase) and phrase in text),
                    found,
                    int(not item.value.get("summary")),
                    int(item.value.get("compaction", 0)),
                )
                ranked.append((rank, item))
        if len(page) < 100 or offset >= 10_000:
            break
        offset += 100
    ranked.sort(key=lambda r: r[0], reverse=True)
    return [item for _, item in ranked[:limit]]


PASSAGE_CHARS = 2_000
"""How much of each hit the recall tool shows: the passage that matched."""


def matched_passage(text: str, query: str, width: int = PASSAGE_CHARS) -> str:
    """The ``width`` characters of ``text`` where ``query`` matches best.

    Where the exact phrase first occurs, else the stretch holding the most
    distinct query words; the start otherwise. Cut ends are marked ``...`` and
    the position is given, so the agent can ask for more.
    """
    if len(text) <= width:
        return text
    lower = text.lower()
    phrase = query.lower().strip()
    at = lower.find(phrase) if phrase else -1
    if at < 0:
        at = _densest(lower, set(re.findall(r"\w+", phrase)), width)
    start = min(max(at - width // 4, 0), len(text) - width)
    end = start + width
    head = "... " if start else ""
    tail = " ..." if end < len(text) else ""
    where = f"(characters {start:,}-{end:,} of {len(text):,})\n"
    return f"{where}{head}{text[start:end]}{tail}"


def _densest(lower: str, words: set[str], width: int) -> int:
    """Where a stretch of ``width`` characters starts that holds most ``words``."""
    hits = sorted(
        (m.start(), w)
        for w in words
        for m in itertools.islice(re.finditer(re.escape(w), lower), 500)
    )
    best, best_at = 0, 0
    for i, (pos, _) in enumerate(hits):
        seen = {w for p, w in hits[i:] if p < pos + width}
        if len(seen) > best:
            best, best_at = len(seen), pos
    return best_at


def format_hits(query: str, hits: Sequence[Item]) -> str:
    """The hits as text for the model: of each, the passage that matched."""
    if not hits:
        return f"No archived message matches {query!r}."
    blocks = []
    for k, item in enumerate(hits, 1):
        v = item.value
        text = matched_passage(str(v.get("text", "")), query)
        blocks.append(
            f"[{k}] {v.get('type')} message {v.get('id') or item.key} "
            f"(removed by compaction #{v.get('compaction')})\n{text}"
        )
    return "\n\n".join(blocks)
