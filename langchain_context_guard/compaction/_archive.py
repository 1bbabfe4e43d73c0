"""The archive: messages removed by compaction, kept in a LangGraph ``BaseStore``.

One item per removed message under ``(*prefix, "context_guard", "archive",
<thread_id>)`` (labels encoded by ``adapters._namespace``, so any thread id
works), keyed by the message id; ``recall_messages`` searches one conversation's
namespace and nothing else. A query is cut to ``MAX_QUERY_CHARS`` characters
and ``MAX_QUERY_WORDS`` distinct words, and each archived message is read once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from langchain_core.messages import BaseMessage, message_to_dict
from langgraph.store.base import BaseStore, Item, PutOp

from ..adapters import ROOT, resolve_prefix, scoped, why_unscoped
from ..engine import CompactionError, is_summary
from ._summary_prompt import serialize

ARCHIVE_NS = ROOT
MAX_QUERY_CHARS = 1_000
"""Characters of a recall query that are searched; the rest is dropped, with a note."""
MAX_QUERY_WORDS = 64
"""Distinct words of a recall query that are searched."""
_WORD = re.compile(r"\w+")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[^\W_a-zA-Z]+")
"""The parts of snake_case and camelCase words: ``KeyError`` -> ``Key``, ``Error``."""


def archive_namespace(thread_id: str, *, prefix: Sequence[str] = ()) -> tuple[str, ...]:
    """Where a thread's removed messages are archived (``prefix``: its labels)."""
    return scoped(prefix, ("archive",), thread_id)


def archive_scope(
    prefix: Sequence[str], thread_id: str | None, values: Mapping[str, Any]
) -> tuple[tuple[str, ...] | None, str]:
    """The conversation's archive namespace, or None and why it has none.

    ``prefix`` may hold ``{key}`` labels, filled from ``values`` (the config's
    ``configurable``).
    """
    labels = resolve_prefix(prefix, values)
    if thread_id is None or labels is None:
        return None, why_unscoped(thread_id, prefix, values)
    return archive_namespace(thread_id, prefix=labels), ""


def archive_ops(
    removed: Sequence[BaseMessage], *, number: int, namespace: tuple[str, ...]
) -> list[PutOp]:
    """One put per message removed by compaction ``number``."""
    ops = []
    for i, m in enumerate(removed):
        value = {
            "id": m.id,
            "type": m.type,
            "name": m.name,
            "summary": is_summary(m),
            "text": serialize([m], max_chars=1_000_000, quoted=False),
            "compaction": number,
            "position": i,
            "message": message_to_dict(m),
        }
        ops.append(PutOp(namespace, m.id or f"compaction-{number}-{i}", value))
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


class Query(NamedTuple):
    """A recall query as searched: its phrase and words, bounded."""

    text: str
    """The searched part, as given."""
    phrase: str
    """``text`` lowercased."""
    words: frozenset[str]
    cut: bool
    """Whether the query was longer than what is searched."""

    @classmethod
    def of(cls, query: str) -> Query:
        """``query`` cut to ``MAX_QUERY_CHARS`` and ``MAX_QUERY_WORDS``."""
        text = query.strip()
        phrase = text[:MAX_QUERY_CHARS].lower()
        words = dict.fromkeys(_WORD.findall(phrase))
        cut = len(text) > MAX_QUERY_CHARS or len(words) > MAX_QUERY_WORDS
        kept = frozenset(list(words)[:MAX_QUERY_WORDS])
        return cls(text[:MAX_QUERY_CHARS], phrase, kept, cut)

    def note(self) -> str:
        """What the tool says when the query was cut ("" when it was not)."""
        if not self.cut:
            return ""
        return (
            f"(Query cut: only its first {MAX_QUERY_CHARS:,} characters and "
            f"{MAX_QUERY_WORDS} distinct words were searched.)\n"
        )


def word_terms(word: str) -> set[str]:
    """A word and its snake_case and camelCase parts, lowercased."""
    return {word.lower(), *(p.lower() for p in _PART.findall(word))}


def terms(text: str) -> set[str]:
    """The words of ``text`` and their parts, lowercased, in one pass each."""
    words = set(_WORD.findall(text))
    return {t for w in words for t in word_terms(w)}


def recall_messages(
    store: BaseStore,
    query: str,
    *,
    thread_id: str | None = None,
    limit: int = 5,
    namespace_prefix: Sequence[str] = (),
) -> list[Item]:
    """Archived messages of a thread that match ``query``, best first.

    Uses the store's semantic index when it has one; else ranks exact phrase
    matches first, then by how many query words occur (whole words, or parts
    of snake_case and camelCase words), real messages before earlier summaries, newer
    compactions first. Only the thread's own namespace is read (``None``
    thread: nothing); ``namespace_prefix`` holds the prefix labels themselves.
    """
    if thread_id is None:
        return []
    ns = archive_namespace(thread_id, prefix=namespace_prefix)
    q = Query.of(query)
    semantic = store.search(ns, query=q.text, limit=limit)
    hits: list[Item] = [h for h in semantic if h.namespace == ns]
    if hits and all(getattr(h, "score", None) is not None for h in hits):
        return hits
    ranked: list[tuple[tuple[int, int, int, int], Item]] = []
    offset = 0
    while True:
        page = store.search(ns, limit=100, offset=offset)
        for item in page:
            if item.namespace != ns:
                continue
            raw = str(item.value.get("text", ""))
            text = raw.lower()
            found = len(q.words & terms(raw))
            if found:
                rank = (
                    int(bool(q.phrase) and q.phrase in text),
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
    q = Query.of(query)
    at = lower.find(q.phrase) if q.phrase else -1
    if at < 0:
        at = _densest(text, q.words, width)
    start = min(max(at - width // 4, 0), len(text) - width)
    end = start + width
    head = "... " if start else ""
    tail = " ..." if end < len(text) else ""
    where = f"(characters {start:,}-{end:,} of {len(text):,})\n"
    return f"{where}{head}{text[start:end]}{tail}"


def _densest(text: str, words: frozenset[str], width: int) -> int:
    """Where a stretch of ``width`` characters starts that holds most ``words``.

    One pass over the text's words and one sliding window over the hits.
    """
    hits = [
        (m.start(), w)
        for m in _WORD.finditer(text)
        for w in word_terms(m.group()) & words
    ]
    inside: Counter[str] = Counter()
    best, best_at, first = 0, 0, 0
    for pos, word in hits:
        inside[word] += 1
        while hits[first][0] <= pos - width:
            old = hits[first][1]
            inside[old] -= 1
            if not inside[old]:
                del inside[old]
            first += 1
        if len(inside) > best:
            best, best_at = len(inside), hits[first][0]
    return best_at


def format_hits(query: str, hits: Sequence[Item]) -> str:
    """The hits as text for the model: of each, the passage that matched.

    The query is never echoed beyond what was searched.
    """
    q = Query.of(query)
    if not hits:
        shown = q.text if len(q.text) <= 200 else q.text[:200] + "..."
        return f"{q.note()}No archived message matches {shown!r}."
    blocks = []
    for k, item in enumerate(hits, 1):
        v = item.value
        text = matched_passage(str(v.get("text", "")), query)
        blocks.append(
            f"[{k}] {v.get('type')} message {v.get('id') or item.key} "
            f"(removed by compaction #{v.get('compaction')})\n{text}"
        )
    return q.note() + "\n\n".join(blocks)
