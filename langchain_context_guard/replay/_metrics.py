"""What the replay measures in one prompt: cost, pairing, evidence, counter error.

Pure functions of messages and token lists; the replay loop in ``replay`` calls
them once per model call and strategy.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately

from ..engine import (
    TiktokenCounter,
    count_messages,
    keys_in_ranges,
    marker,
    result_key,
    text_of,
)

CACHE_RATE = 0.1
"""Share of the list price billed for a cached prompt prefix."""
OUTPUT_RATE = 4.0
"""Price of an output token in input tokens, for the summary calls' replies.

The lowest ratio among the providers the replay models (GPT-4.1 $2 / $8 per
million, Claude Sonnet $3 / $15, Gemini 2.5 Flash $0.30 / $2.50), so a strategy
that calls a summary model is charged at least what it costs."""
COUNTERS = ("tiktoken", "tiktoken+usage", "approximate", "approximate+usage")
"""Counters whose error against the provider's ``prompt_tokens`` is measured."""

TOKEN = re.compile(r"[A-Za-z0-9_./-]+")
"""A run of characters that may hold an identifier (see ``identifiers``)."""
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"(?<![\w.])\d{3,}(?![\d.])")
_CAMEL = re.compile(r"[a-z][A-Z]")


def identifiers(text: str) -> frozenset[str]:
    """The identifiers in ``text`` that count as evidence.

    Four kinds, found deterministically: paths (a token with ``/``, leading
    ``./`` or ``/`` dropped, plus its file name), dotted names with a letter of at
    least 4 characters (``setup.py``, ``models.QuerySet``), code names of at least
    4 characters with an underscore or a camel hump (``get_queryset``,
    ``QuerySet``), and numbers of 3 or more digits (line numbers, ids).
    """
    out: set[str] = set(_NUMBER.findall(text))
    for raw in TOKEN.findall(text):
        token = raw.strip("./-")
        if "/" in token:
            out.add(token)
            base = token.rsplit("/", 1)[-1]
            if "." in base and len(base) >= 4:
                out.add(base)
        elif "." in token and len(token) >= 4 and re.search("[A-Za-z]", token):
            out.add(token)
        for word in _WORD.findall(token):
            if len(word) >= 4 and ("_" in word or _CAMEL.search(word)):
                if re.search("[A-Za-z]", word):
                    out.add(word)
    return frozenset(out)


GUARD_WRITTEN = frozenset(
    {"digest", "placeholder", "synthetic_result", "summary", "cleared"}
)
"""``MARKER_KEY`` kinds of messages whose text the library wrote, not the history."""
_SOURCE = r'(?:; full text: read_tool_result\("[^"\n]*"\))?'
_NOTES = re.compile(
    r"\n*\.\.\. \[[\d,]+ characters truncated; original [\d,]+ characters"
    r"(?:; lines [\d,]+-[\d,]+ cut: [^\]\n;]*)?" + _SOURCE + r"\] "
    r"\.\.\.\n*"
    r"|\[\.\.\. [\d,]+ lines omitted, original [\d,]+ characters; older "
    r"(?:tool output|assistant message|tool call argument \S+) compressed by "
    r"context guard" + _SOURCE + r" \.\.\.\]"
    r"| \.\.\.\[[\d,]+ chars\]"
)
"""The marker text truncation and compression put inside a kept copy."""


_READ_BACK = re.compile(
    r"(?:characters truncated; original [\d,]+ characters"
    r"(?:; lines [\d,]+-[\d,]+ cut: [^\]\n;]*)?"
    r"|compressed by context guard|lines omitted by context guard"
    r"|output cleared by context guard to fit the context window)"
    r'; full text: read_tool_result\("([^"\n]*)"\)(?:\] \.\.\.| \.\.\.\]|\])'
)
"""The pointer of a truncation, compression, superseded-read or cleared marker."""
_POINTING = frozenset({"truncated", "compressed", "superseded", "cleared"})
"""``MARKER_KEY`` kinds of messages whose marker may point to an archived result."""
_DIGEST_CALL = re.compile(r"^- [^\n]*? \(([^()\s]+)\): ", re.MULTILINE)
"""A call the digest lists with its id or key (``GuardPolicy.archived_results``)."""
_DIGEST_KEYS = re.compile(r"^Keys of all their archived outputs[^:\n]*: (.*)$", re.M)
"""The digest's line naming the keys of every dropped result."""


def pointers(sent: Sequence[BaseMessage]) -> frozenset[str]:
    """Tool call ids and result keys whose archived result a sent prompt names.

    A truncation, compression or superseded read's marker naming its result
    (``read_tool_result("#12")``, or its call id), a call the digest lists with
    its id or key, or a key in the digest's line of ranges (``#1-#40``): the
    adapter archives every result it shortens or drops, under its call id and
    its key, so each reads a result back. Only in messages the library marked,
    in its own marker's words: a pointer the model or a user wrote counts not.
    """
    out: set[str] = set()
    for message in sent:
        mark = marker(message)
        kind = None if mark is None else mark.get("kind")
        text = text_of(message.content) if kind is not None else ""
        if kind in _POINTING and "read_tool_result(" in text:
            out.update(_READ_BACK.findall(text))
        if kind == "digest":
            out.update(_DIGEST_CALL.findall(text))
            for line in _DIGEST_KEYS.findall(text):
                out.update(result_key(n) for n in keys_in_ranges(line))
    return frozenset(out)


def strip_notes(text: str) -> str:
    """``text`` without the truncation and compression markers (each a newline)."""
    return _NOTES.sub("\n", text)


def from_history(message: BaseMessage, history_ids: frozenset[str] | set[str]) -> bool:
    """Whether a sent message came from the history, whole or as a cut copy.

    It must carry the id of a history message and no ``MARKER_KEY`` marker of a
    kind the library writes itself (``GUARD_WRITTEN``): digests, placeholders,
    synthetic results and summaries do not count, nor does a message another
    strategy wrote (a summary has a new id).
    """
    if message.id is None or message.id not in history_ids:
        return False
    mark = marker(message)
    return mark is None or mark.get("kind") not in GUARD_WRITTEN


def message_text(message: BaseMessage) -> str:
    """What a model reads in a message: its text and its tool-call arguments."""
    parts = [text_of(message.content)]
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            parts += [str(v) for v in call["args"].values()]
    return "\n".join(parts)


def message_key(message: BaseMessage) -> tuple[str, ...]:
    """A message as a provider receives it, for prefix-cache comparison."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    calls = ""
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = json.dumps(
            [[c["name"], c["args"], c["id"]] for c in message.tool_calls],
            sort_keys=True,
            default=str,
        )
    call_id = message.tool_call_id if isinstance(message, ToolMessage) else ""
    return (message.type, text, calls, call_id)


def cached_prefix(previous: Sequence[Any], current: Sequence[Any]) -> int:
    """How many leading items of ``current`` are unchanged since ``previous``."""
    n = 0
    for a, b in zip(previous, current, strict=False):
        if a != b:
            break
        n += 1
    return n


def billed_input(
    tokens: Sequence[float], cached: int, cache_rate: float = CACHE_RATE
) -> float:
    """Input billed for one call: the first ``cached`` items at ``cache_rate``."""
    return cache_rate * sum(tokens[:cached]) + sum(tokens[cached:])


def tool_pairing_errors(messages: Sequence[BaseMessage]) -> list[str]:
    """What a provider would reject in a prompt's tool-call pairing (empty: none).

    Every tool call must be answered by the ToolMessages directly after its
    AIMessage, every ToolMessage must stand in such a group, and no two calls
    may share an id (Anthropic: "`tool_use` ids must be unique").
    """
    errors: list[str] = []
    called: set[str | None] = set()
    i = 0
    while i < len(messages):
        message = messages[i]
        if isinstance(message, ToolMessage):
            errors.append(f"message {i}: result {message.tool_call_id!r} has no call")
        elif isinstance(message, AIMessage) and message.tool_calls:
            ids = [c["id"] for c in message.tool_calls]
            for c in ids:
                if c in called:
                    errors.append(f"message {i}: call id {c!r} used again")
                called.add(c)
            wanted = set(ids)
            answered: set[str | None] = set()
            while i + 1 < len(messages) and isinstance(messages[i + 1], ToolMessage):
                i += 1
                call_id = cast(ToolMessage, messages[i]).tool_call_id
                if call_id not in wanted or call_id in answered:
                    errors.append(f"message {i}: result {call_id!r} has no call")
                answered.add(call_id)
            errors += [f"call {c!r} has no result" for c in wanted - answered]
        i += 1
    return errors


def evidence(
    action: str, seen: frozenset[str] | set[str], sent: Sequence[frozenset[str]]
) -> tuple[int, int]:
    """(identifiers of ``action`` seen earlier, of those still in ``sent``)."""
    earlier = identifiers(action) & seen
    kept = sum(1 for name in earlier if any(name in ids for ids in sent))
    return len(earlier), kept


def counter_errors(
    history: list[BaseMessage], provider: int, plain: int, counter: TiktokenCounter
) -> dict[str, float]:
    """Each of ``COUNTERS``' relative error against the provider's count.

    ``plain`` is the history's plain tiktoken count, already known to the caller.
    """
    counts = {
        "tiktoken": plain,
        "tiktoken+usage": count_messages(history, counter),
        "approximate": count_tokens_approximately(history),
        "approximate+usage": count_tokens_approximately(
            history, use_usage_metadata_scaling=True
        ),
    }
    return {name: abs(n - provider) / provider for name, n in counts.items()}


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (``share`` in 0..1); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]
