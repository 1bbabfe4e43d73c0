"""Old images offloaded: the newest ``keep`` stay whole, older ones become a pointer.

A screenshot costs what its provider charges for it (``tokens._image_cost``)
on every call while it stays in the history, long after the model has acted on
it. ``offload_old_images``
replaces each image block older than the newest ``keep`` (counted over the whole
history, newest first) by a one-line text block naming its key,
``view_image("img_<16 hex>")``: the key is a digest of the block, so the same
image always gets the same key and the same history the same output (no clock,
no counter). ``old_images`` gives the blocks it replaces, by key, for an adapter
to archive per conversation (``ImageOffloadMiddleware``). Messages keep their
role, id and other blocks; a message whose text was a plain string has no image
to offload.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})
"""Content block types that hold an image (LangChain, OpenAI, Responses)."""


def is_image(block: object) -> bool:
    """Whether a content block holds an image."""
    return isinstance(block, dict) and block.get("type") in IMAGE_BLOCKS


def image_key(block: dict[str, Any]) -> str:
    """The archive key of an image block: a digest of its content."""
    text = json.dumps(block, sort_keys=True, default=str)
    return "img_" + hashlib.sha256(text.encode()).hexdigest()[:16]


def image_pointer(key: str) -> str:
    """The text an offloaded image leaves in the prompt."""
    return f'[image offloaded by context guard; view it again: view_image("{key}")]'


def _older(messages: Sequence[BaseMessage], keep: int) -> dict[int, list[int]]:
    """Message index -> its image blocks past the newest ``keep`` images."""
    out: dict[int, list[int]] = {}
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        content = messages[i].content
        if not isinstance(content, list):
            continue
        for k in range(len(content) - 1, -1, -1):
            if is_image(content[k]):
                seen += 1
                if seen > keep:
                    out.setdefault(i, []).append(k)
    return out


def offload_old_images(
    messages: Sequence[BaseMessage], keep: int = 2
) -> list[BaseMessage]:
    """Every image block past the newest ``keep`` replaced by its pointer.

    The input list itself when no image is past them; the input is never changed.
    """
    older = _older(messages, keep)
    if not older:
        return messages if isinstance(messages, list) else list(messages)
    out = list(messages)
    for i, blocks in older.items():
        content = list(out[i].content)
        for k in blocks:
            block = content[k]
            if isinstance(block, dict):
                pointer = image_pointer(image_key(block))
                content[k] = {"type": "text", "text": pointer}
        out[i] = out[i].model_copy(update={"content": content})
    return out


def old_images(
    messages: Sequence[BaseMessage], keep: int = 2
) -> dict[str, dict[str, Any]]:
    """The image blocks ``offload_old_images`` replaces, by key, oldest first."""
    out: dict[str, dict[str, Any]] = {}
    for i, blocks in sorted(_older(messages, keep).items()):
        content = messages[i].content
        for k in sorted(blocks):
            block = content[k]
            if isinstance(block, dict):
                out[image_key(block)] = block
    return out
