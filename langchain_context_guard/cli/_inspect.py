"""``context-guard inspect``: show what the guard would do to a saved history."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from ..engine import ContextGuard, marker, text_of
from ..replay import TranscriptError, load_transcript

SQLITE_HEADER = b"SQLite format 3\x00"

# What each pass does to a message it changes or removes, in the table's words.
_CHANGED = {
    "sanitize": "sanitized",
    "truncate": "truncated",
    "compress": "compressed",
    "strip_thinking": "thinking stripped",
    "bound_thinking": "stale thinking dropped",
    "trim": "truncated",
    "repair": "repaired",
    "hygiene": "placeholder",
}
_REMOVED = {
    "sanitize": "dropped (malformed)",
    "provider_compaction": "dropped (before a compaction block)",
    "trim": "trimmed",
    "repair": "dropped (orphan)",
    "hygiene": "dropped (empty)",
}
_ROLES = {"human": "user", "ai": "assistant"}


@dataclass(frozen=True)
class Row:
    """One message of the inspected history and what happens to it."""

    index: int | None
    role: str
    tokens: int
    chars: int
    fate: str
    tokens_sent: int

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict of this row."""
        return {
            "index": self.index,
            "role": self.role,
            "tokens": self.tokens,
            "chars": self.chars,
            "fate": self.fate,
            "tokens_sent": self.tokens_sent,
        }


def is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with the SQLite file header."""
    try:
        with path.open("rb") as f:
            return f.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection, so inspecting never changes the file."""
    return sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)


def _saver(path: Path) -> Any:
    """A ``SqliteSaver`` over a read-only connection (the caller closes it)."""
    try:
        from langgraph.checkpoint.sqlite import SqliteSaver
    except ImportError:
        raise TranscriptError(
            f"{path.name}: reading a checkpoint database needs "
            "langgraph-checkpoint-sqlite (pip install "
            "'langchain-context-guard[sqlite]')"
        ) from None
    return SqliteSaver(_connect(path))


def _not_a_checkpointer(path: Path, exc: Exception) -> TranscriptError:
    return TranscriptError(
        f"{path.name}: not a LangGraph SQLite checkpoint database ({exc}); "
        "expected a file written by langgraph.checkpoint.sqlite.SqliteSaver"
    )


def list_threads(path: Path) -> list[tuple[str, int]]:
    """``(thread_id, checkpoints)`` of every thread in a SQLite checkpointer file.

    Read through the checkpointer's own ``SqliteSaver.list``.
    """
    saver = _saver(path)
    counts: dict[str, int] = {}
    try:
        with closing(saver.conn):
            for item in saver.list(None):
                conf = item.config["configurable"]
                if conf.get("checkpoint_ns", "") == "":
                    thread = str(conf["thread_id"])
                    counts[thread] = counts.get(thread, 0) + 1
    except sqlite3.Error as exc:
        raise _not_a_checkpointer(path, exc) from None
    return sorted(counts.items())


def load_thread(path: Path, thread_id: str) -> list[BaseMessage]:
    """The ``messages`` of the latest checkpoint of one thread (``get_tuple``)."""
    saver = _saver(path)
    try:
        with closing(saver.conn):
            found = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    except sqlite3.Error as exc:
        raise _not_a_checkpointer(path, exc) from None
    if found is None:
        known = ", ".join(t for t, _ in list_threads(path)) or "none"
        raise TranscriptError(
            f"{path.name}: no thread {thread_id!r}; threads in this file: {known}"
        )
    values = found.checkpoint["channel_values"]
    messages = values.get("messages")
    if not isinstance(messages, list):
        raise TranscriptError(
            f"{path.name}: thread {thread_id!r} has no 'messages' channel; "
            "expected the state of a LangGraph agent"
        )
    return [m for m in messages if isinstance(m, BaseMessage)]


def load_history(path: Path, thread: str | None) -> list[BaseMessage] | None:
    """Messages from a transcript or checkpointer thread; None means 'list threads'."""
    if is_sqlite(path):
        return None if thread is None else load_thread(path, thread)
    if thread is not None:
        raise TranscriptError(
            f"{path.name}: --thread needs a LangGraph SQLite checkpoint database, "
            "and this file is not a SQLite database"
        )
    return load_transcript(path)


def _with_ids(messages: list[BaseMessage]) -> list[BaseMessage]:
    """Give every message a unique id, so each can be followed through the passes."""
    ids = [m.id for m in messages]
    if all(ids) and len(set(ids)) == len(ids):
        return messages
    return [m.model_copy(update={"id": f"#{i}"}) for i, m in enumerate(messages)]


def analyse(guard: ContextGuard, history: list[BaseMessage]) -> dict[str, Any]:
    """Run the guard on ``history``; describe every message's fate."""
    messages = _with_ids(history)
    result = guard.prepare(messages)
    report = result.report
    touched: dict[str, list[str]] = {}
    removed: dict[str, str] = {}
    for event in report.events:
        for label in event.changed:
            touched.setdefault(label, []).append(_CHANGED.get(event.kind, event.kind))
        for label in event.removed:
            removed[label] = _REMOVED.get(event.kind, "removed")
    count = guard.counter.count_message
    sent = {m.id: m for m in result.messages}
    rows: list[Row] = []
    for i, m in enumerate(messages):
        out = sent.get(m.id)
        if out is None:
            fate, after = removed.get(str(m.id), "removed"), 0
        elif out is m:
            fate, after = "kept", count(m)
        else:
            kinds = list(dict.fromkeys(touched.get(str(m.id), ["rewritten"])))
            fate, after = "+".join(kinds), count(out)
        rows.append(_row(i, m, count(m), fate, after))
    known = {m.id for m in messages}
    for m in result.messages:
        if m.id not in known:
            kind = (marker(m) or {}).get("kind", "added")
            rows.append(_row(None, m, 0, f"synthetic {kind}", count(m)))
    return {
        "messages": len(history),
        "messages_sent": len(result.messages),
        "rows": rows,
        "report": report,
        "usage": {"history": result.usage(messages), "sent": result.usage()},
    }


def _row(index: int | None, m: BaseMessage, tokens: int, fate: str, sent: int) -> Row:
    role = _ROLES.get(m.type, m.type)
    return Row(index, role, tokens, len(text_of(m.content)), fate, sent)


def render_text(source: str, analysis: dict[str, Any], reserve: int) -> str:
    """The human-readable inspect report."""
    report = analysis["report"]
    rows: list[Row] = analysis["rows"]
    fits = report.tokens_after <= report.budget
    lines = [
        f"{source}: {analysis['messages']} messages",
        f"window {report.context_window:,} tokens (from {report.window_source}), "
        f"reserve {reserve:,}, budget {report.budget:,}; counter {report.counter}",
        "",
        f"{'#':>4}  {'role':<9} {'tokens':>7} {'chars':>8}  {'sent':>7}  what happens",
    ]
    for r in rows:
        index = "+" if r.index is None else str(r.index)
        lines.append(
            f"{index:>4}  {r.role:<9} {r.tokens:>7,} {r.chars:>8,}  "
            f"{r.tokens_sent:>7,}  {r.fate}"
        )
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.fate] = counts.get(r.fate, 0) + 1
    summary = ", ".join(f"{n} {fate}" for fate, n in sorted(counts.items()))
    lines += [
        "",
        f"messages: {summary}",
        f"tokens: {report.tokens_before:,} -> {report.tokens_after:,} "
        f"({'within' if fits else 'OVER'} budget {report.budget:,})",
    ]
    lines += [
        f"usage, {what}: {usage.describe()}"
        for what, usage in analysis["usage"].items()
    ]
    if report.events:
        lines.append("events:")
        lines += [f"  {_event_line(e.describe())}" for e in report.events]
    return "\n".join(lines)


def _event_line(text: str) -> str:
    return text.removeprefix("Context guard: ").replace("; ", ": ", 1)


def render_json(source: str, analysis: dict[str, Any], reserve: int) -> str:
    """The machine-readable inspect report."""
    report = analysis["report"]
    doc = {
        "source": source,
        "messages": analysis["messages"],
        "messages_sent": analysis["messages_sent"],
        "reserve_tokens": reserve,
        "within_budget": report.tokens_after <= report.budget,
        "rows": [r.to_dict() for r in analysis["rows"]],
        "report": report.to_dict(),
        "usage": {k: u.to_dict() for k, u in analysis["usage"].items()},
    }
    return json.dumps(doc, indent=2)


def render_threads(path: Path, threads: list[tuple[str, int]], as_json: bool) -> str:
    """The list of threads in a checkpointer file."""
    if as_json:
        doc = [{"thread_id": t, "checkpoints": n} for t, n in threads]
        return json.dumps({"source": path.name, "threads": doc}, indent=2)
    if not threads:
        return f"{path.name}: no threads"
    lines = [f"{path.name}: {len(threads)} thread(s); pick one with --thread ID"]
    lines += [f"  {t}  ({n} checkpoints)" for t, n in threads]
    return "\n".join(lines)
