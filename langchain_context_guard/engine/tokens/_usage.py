"""Usage by category: what a prompt's tokens are spent on.

Rule: every message costs exactly what the counter counts for it
(``count_message``), and that cost is split, never re-estimated as a whole. The
parts that are not the message's own text are measured with the counter's
pieces (``_blocks``): images at their flat cost, reasoning blocks, and tool
calls (overhead, name and JSON arguments); what is left (the message's
overhead, role and text) goes to the message's own category (system, user,
assistant or tool results). A message the guard wrote in place of others
(summary, digest, placeholder) is a note as a whole. So the categories add up
to the counter's count of the messages plus the tool schemas: to
``ContextGuard.count_tokens(messages, tools=...)`` less ``REPLY_OVERHEAD``, for a
history without provider usage to anchor or calibrate on (those scale the
guard's figure, not the counter's). A counter without ``text_tokens`` (a
callable) has its parts estimated at four characters a token, capped at the
message's count.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from .._context_usage import Category, ContextUsage
from .._messages import marker
from ._blocks import BINARY_BLOCKS, TOOL_CALL_OVERHEAD, block_text, call_parts
from ._counters import TokenCounter

_NOTES = frozenset({"summary", "digest", "placeholder", "usage_notice", "cleared"})
"""Marker kinds of the notes the guard writes (in place of others, or about usage)."""
_OWN: dict[str, Category] = {
    "system": "system",
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "tool": "tool_results",
    "function": "tool_results",
}
_DEFAULT_IMAGE_TOKENS = 1_600


def usage_by_category(
    messages: Sequence[BaseMessage],
    counter: TokenCounter,
    tools_tokens: int = 0,
    window: int = 0,
) -> ContextUsage:
    """Tokens of ``messages`` (and ``tools_tokens`` of schemas) by category."""
    totals: dict[str, int] = {"tools": tools_tokens}
    measure = _text_measure(counter)
    image_tokens = int(getattr(counter, "image_tokens", _DEFAULT_IMAGE_TOKENS))
    for message in messages:
        for name, tokens in _split(message, counter, measure, image_tokens).items():
            totals[name] = totals.get(name, 0) + tokens
    return ContextUsage(**totals, messages=len(messages), window=window)


def _text_measure(counter: TokenCounter) -> Callable[[str], int]:
    method = getattr(counter, "text_tokens", None)
    if callable(method):
        return lambda text: int(method(text)) if text else 0
    return lambda text: -(-len(text) // 4)


def _split(
    message: BaseMessage,
    counter: TokenCounter,
    measure: Callable[[str], int],
    image_tokens: int,
) -> dict[Category, int]:
    """One message's count, split into categories (see the module's rule)."""
    total = counter.count_message(message)
    mark = marker(message)
    if mark is not None and mark.get("kind") in _NOTES:
        return {"notes": total}
    role = getattr(message, "role", None) if message.type == "chat" else message.type
    own = _OWN.get(str(role), "user")
    parts: dict[Category, int] = {}
    left = total

    def take(name: Category, tokens: int) -> None:
        nonlocal left
        tokens = min(tokens, left)
        if tokens > 0:
            parts[name] = parts.get(name, 0) + tokens
            left -= tokens

    ai = message if isinstance(message, AIMessage) else None
    if ai is not None:
        flat, texts = call_parts(ai.tool_calls)
        for bad in ai.invalid_tool_calls:
            flat += TOOL_CALL_OVERHEAD
            texts += (bad.get("name") or "", bad.get("args") or "")
        take("tool_calls", flat + sum(map(measure, texts)))
        reasoning = ai.additional_kwargs.get("reasoning_content")
        if isinstance(reasoning, str):
            take("reasoning", measure(reasoning))
    if not isinstance(message.content, str):
        calls_elsewhere = ai is not None and bool(ai.tool_calls)
        for block in message.content:
            kind = _block_category(block)
            if kind is not None:
                rule = getattr(counter, "image_rule", None)
                text, flat = block_text(block, image_tokens, calls_elsewhere, rule)
                take(kind, flat + measure(text))
    take(own, left)
    return parts


def _block_category(block: Any) -> Category | None:
    """The category of a content block that is not its message's own text."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind in BINARY_BLOCKS:
        return "images"
    if kind in {"thinking", "redacted_thinking", "reasoning"}:
        return "reasoning"
    if kind in {"tool_use", "tool_call"}:
        return "tool_calls"
    return None
