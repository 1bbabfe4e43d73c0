"""What a message's content blocks and tool calls give the tokenizer.

Text to encode from each content block (a flat cost for binary ones) and from
each tool call; ``TiktokenCounter`` counts through these.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
    block: Any, image_tokens: int, calls_elsewhere: bool = True
) -> tuple[str, int]:
    """Text to encode from one content block, plus any flat token cost."""
    if isinstance(block, str):
        return block, 0
    if not isinstance(block, dict):
        return str(block), 0
    kind = block.get("type")
    if kind in BINARY_BLOCKS:
        return "", image_tokens
    if kind == "text":
        return str(block.get("text", "")), 0
    if kind == "thinking":
        return str(block.get("thinking", "")), 0
    if kind == "redacted_thinking":
        return "", len(str(block.get("data", ""))) // 4
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
