"""What a message's content blocks and tool calls give the tokenizer.

Text to encode from each content block (a flat cost for binary ones) and from
each tool call; ``TiktokenCounter`` counts through these.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ._image_cost import IMAGE_BLOCKS, ImageRule
from ._image_cost import image_tokens as priced_image

MESSAGE_OVERHEAD = 3
"""Tokens a provider adds around every message (role and separators)."""
TOOL_CALL_OVERHEAD = 4
"""Tokens around each tool call besides its name and arguments."""

BINARY_BLOCKS = frozenset(
    {
        "image",
        "image_url",
        "input_image",
        "file",
        "audio",
        "input_audio",
        "video",
        "document",
        "input_file",
    }
)


def block_text(
    block: Any,
    image_tokens: int,
    calls_elsewhere: bool = True,
    rule: ImageRule | None = None,
) -> tuple[str, int]:
    """Text to encode from one content block, plus any flat token cost.

    An image costs ``image_tokens``, or what ``rule`` (its provider's) says for
    its size (``_image_cost``).
    """
    if isinstance(block, str):
        return block, 0
    if not isinstance(block, dict):
        return str(block), 0
    kind = block.get("type")
    if kind in BINARY_BLOCKS:
        if rule is not None and kind in IMAGE_BLOCKS:
            return "", priced_image(block, rule, image_tokens)
        return "", image_tokens
    if kind == "text":
        return str(block.get("text", "")), 0
    if kind == "thinking":
        return str(block.get("thinking", "")), 0
    if kind == "redacted_thinking":
        return "", len(str(block.get("data", ""))) // 4
    if kind == "compaction":  # its summary as text; an opaque one as encrypted data
        opaque = len(str(block.get("encrypted_content") or "")) // 4
        return str(block.get("content") or ""), opaque
    if kind == "reasoning":
        summary = block.get("summary") or []
        parts = [str(block.get("reasoning", ""))]
        parts += [str(s.get("text", "")) for s in summary if isinstance(s, dict)]
        return "\n".join(p for p in parts if p), 0
    if kind in {"tool_use", "tool_call"}:
        if calls_elsewhere:
            return "", 0  # counted through message.tool_calls
        args = block.get("input", block.get("args", {}))
        return f"{block.get('name', '')} {args_text(args)}", TOOL_CALL_OVERHEAD
    return json.dumps(block, sort_keys=True, default=str), 0


def args_text(args: Any) -> str:
    return args if isinstance(args, str) else json.dumps(args, default=str)


def call_parts(calls: Sequence[Any]) -> tuple[int, list[str]]:
    """Flat tokens and texts of an assistant message's tool calls."""
    texts: list[str] = []
    for call in calls:
        texts += (call["name"], args_text(call["args"]))
    return TOOL_CALL_OVERHEAD * len(calls), texts


def message_parts(
    message: BaseMessage,
    image_tokens: int,
    calls: bool = True,
    rule: ImageRule | None = None,
) -> tuple[int, list[str]]:
    """A message's flat tokens, and the texts whose tokens add to them.

    ``calls=False``: without its ``tool_calls`` (``call_parts``); ``rule``: the
    provider's image rule (``block_text``).
    """
    flat, texts = MESSAGE_OVERHEAD, [message.type]
    if message.name:
        flat += 1
        texts.append(message.name)
    content = message.content
    ai = message if isinstance(message, AIMessage) else None
    if isinstance(content, str):
        texts.append(content)  # ``block_text`` of a string
    else:
        calls_elsewhere = ai is not None and bool(ai.tool_calls)
        for block in content:
            text, cost = block_text(block, image_tokens, calls_elsewhere, rule)
            flat += cost
            texts.append(text)
    if ai is not None:
        if calls:
            extra, call_texts = call_parts(ai.tool_calls)
            flat += extra
            texts += call_texts
        for bad in ai.invalid_tool_calls:
            flat += TOOL_CALL_OVERHEAD
            texts += (bad.get("name") or "", bad.get("args") or "")
        reasoning = ai.additional_kwargs.get("reasoning_content")
        if isinstance(reasoning, str):
            texts.append(reasoning)
    return flat, texts
