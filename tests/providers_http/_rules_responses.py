"""OpenAI's Responses API: what the stand-in counts and refuses, and its ledger.

``POST /v1/responses`` takes ``input`` items. Where each rule comes from:

- A ``reasoning`` item is followed by the item it was produced with ("Item
  'rs_…' of type 'reasoning' was provided without its required following
  item.", the API's text as public issue trackers quote it); a ``function_call``
  or ``message`` item produced with a reasoning item needs that item before it
  ("Item 'fc_…' of type 'function_call' was provided without its required
  'reasoning' item: 'rs_…'.", same source). Reasoning models:
  https://platform.openai.com/docs/guides/reasoning
- Every ``function_call`` is answered by a ``function_call_output`` with its
  ``call_id`` ("No tool output found for function call call_….", same source),
  and every output answers a call ("No tool call found for function call output
  with call_id …." [inferred wording]).
- With ``store=false`` a reasoning item travels by value: its
  ``encrypted_content`` must come back unchanged (code
  ``invalid_encrypted_content``; the message is [inferred] around the reported
  phrase "could not be verified"), and one sent without it cannot be looked up
  ("Item with id 'rs_…' not found. Items are not persisted when `store` is set to
  false. ..." [inferred wording]).
- A ``compaction`` item stands for everything before it: input before the latest
  one is neither counted nor checked
  (https://platform.openai.com/docs/guides/conversation-state, compaction).
- Over the limit: the Chat Completions error, with ``param`` ``input``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
from dataclasses import dataclass, field

from ._rules import Body, Refusal, _openai_error, _text, _tools, tokens

COMPACTION_TOKENS = 200
"""What the stand-in counts for a ``compaction`` item (its opaque summary)."""


def items_of(body: Body) -> list[Body]:
    """The request's ``input`` as a list of items."""
    items = body.get("input")
    if isinstance(items, str):
        return [{"type": "message", "role": "user", "content": items}]
    return list(items or [])


def latest_compaction(items: list[Body]) -> int:
    """Index of the last ``compaction`` item (0: none)."""
    held = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
    return held[-1] if held else 0


def item_tokens(item: Body) -> int:
    """Raw cl100k tokens of one input item (4 per item framing)."""
    kind = item.get("type", "message")
    if kind == "function_call":
        return 4 + tokens(item["name"]) + tokens(item.get("arguments", ""))
    if kind == "function_call_output":
        output = item.get("output")
        return 4 + (tokens(output) if isinstance(output, str) else _text(output))
    if kind == "reasoning":
        return 4 + sum(tokens(s.get("text", "")) for s in item.get("summary") or [])
    if kind == "compaction":
        return COMPACTION_TOKENS
    return 4 + _text(item.get("content"))


def responses_tokens(body: Body, multiplier: float) -> int:
    """Input tokens of a Responses request, from its latest compaction item on."""
    items = items_of(body)
    raw = 3 + tokens(str(body.get("instructions") or "")) + _tools(body)
    raw += sum(item_tokens(i) for i in items[latest_compaction(items) :])
    return math.ceil(raw * multiplier)


def compaction_threshold(body: Body) -> int | None:
    """The ``compaction`` entry's ``compact_threshold`` of ``context_management``."""
    for entry in body.get("context_management") or []:
        if entry.get("type") == "compaction":
            return int(entry.get("compact_threshold") or 0)
    return None


def responses_too_long(requested: int, limit: int) -> Refusal:
    """The answer to an input over the context window (as Chat Completions')."""
    return _openai_error(
        f"This model's maximum context length is {limit} tokens. However, your "
        f"messages resulted in {requested} tokens. Please reduce the length of the "
        "messages.",
        "input",
        "context_length_exceeded",
    )


@dataclass
class Ledger:
    """The reasoning items one server produced, and what came with them."""

    secret: bytes = b"stand-in reasoning key"
    encrypted: dict[str, str] = field(default_factory=dict)
    """Each reasoning id's ``encrypted_content``."""
    followers: dict[str, list[str]] = field(default_factory=dict)
    """Each reasoning id's following items."""
    reasoning_of: dict[str, str] = field(default_factory=dict)
    """Each produced item's reasoning id."""

    def issue(self, reasoning: str, thought: str, following: list[str]) -> str:
        """Record a reasoning item; its ``encrypted_content``."""
        mac = hmac.new(self.secret, thought.encode(), hashlib.sha256).hexdigest()
        sealed = json.dumps({"thought": thought, "mac": mac})
        content = base64.b64encode(sealed.encode()).decode()
        self.encrypted[reasoning] = content
        self.followers[reasoning] = following
        for item in following:
            self.reasoning_of[item] = reasoning
        return content


def _error(message: str, code: str | None = None) -> Refusal:
    return _openai_error(message, "input", code)


def _reasoning_item(
    items: list[Body], i: int, store: bool, ledger: Ledger
) -> Refusal | None:
    item = items[i]
    rs = str(item.get("id"))
    content = item.get("encrypted_content")
    if content is None and not store:
        return _error(
            f"Item with id '{rs}' not found. Items are not persisted when `store` "
            "is set to false. Try again with `store` set to true, or remove this "
            "item from your input."
        )
    if content is not None and ledger.encrypted.get(rs) != content:
        return _error(
            f"The encrypted content for item {rs} could not be verified.",
            "invalid_encrypted_content",
        )
    after = items[i + 1] if i + 1 < len(items) else None
    follows = after is not None and after.get("type") in {"message", "function_call"}
    if follows and after is not None and after.get("id") in ledger.reasoning_of:
        follows = after["id"] in ledger.followers.get(rs, [])
    if not follows:
        return _error(
            f"Item '{rs}' of type 'reasoning' was provided without its required "
            "following item."
        )
    return None


def responses_violation(body: Body, ledger: Ledger) -> Refusal | None:
    """The first reasoning or pairing rule the request breaks, as OpenAI words it."""
    items = items_of(body)
    items = items[latest_compaction(items) :]
    store = body.get("store") is not False
    seen: set[str] = set()
    calls: dict[str, int] = {}
    for i, item in enumerate(items):
        kind = item.get("type", "message")
        if kind == "reasoning":
            broken = _reasoning_item(items, i, store, ledger)
            if broken is not None:
                return broken
            seen.add(str(item.get("id")))
        required = ledger.reasoning_of.get(str(item.get("id")))
        if required is not None and required not in seen:
            return _error(
                f"Item '{item['id']}' of type '{kind}' was provided without its "
                f"required 'reasoning' item: '{required}'."
            )
        if kind == "function_call":
            calls[item["call_id"]] = i
        elif kind == "function_call_output":
            if calls.pop(item.get("call_id"), None) is None:
                return _error(
                    "No tool call found for function call output with call_id "
                    f"{item.get('call_id')}."
                )
    if calls:
        return _error(f"No tool output found for function call {next(iter(calls))}.")
    return None
