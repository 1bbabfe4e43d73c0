"""What an image costs, by the rule of the provider that reads it.

Where the model is known (``image_rule`` of its name) and the image's size can
be read from its own bytes (base64 data: PNG, JPEG, GIF, WebP headers), the
count follows the provider's documented rule:

- Anthropic (``claude-*``): ``width * height / 750`` tokens, after an image whose
  long edge is over 1,568 px or that is over about 1,600 tokens is scaled down,
  aspect kept (docs.anthropic.com/en/docs/build-with-claude/vision, "Calculate
  image costs").
- OpenAI (``gpt-*``, ``o1``/``o3``/``o4``): ``detail="low"`` costs 85; otherwise
  the image is scaled to fit 2,048 x 2,048, then its shortest side to 768 px, and
  each 512 px tile costs 170, plus 85 (platform.openai.com/docs/guides/
  images-vision, "Calculating costs"; the tile rule of GPT-4o and GPT-4.1, taken
  for every GPT model).
- Gemini (``gemini-*``): 258 tokens when both sides are at most 384 px; larger
  images are tiled in 768 x 768 px tiles of 258 each
  (ai.google.dev/gemini-api/docs/tokens, "Image tokens").

Anything else costs the flat ``image_tokens`` (``GuardPolicy.image_tokens``,
1,600 by default: about what Claude charges for an image at its size limit):
an image given by URL (its size is unknown without fetching it, which the
engine never does), bytes whose size cannot be read, another model, and other
binary blocks (files, audio).
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from collections.abc import Mapping
from typing import Any, Literal

from .._window import base_model_name

ImageRule = Literal["anthropic", "openai", "gemini"]
IMAGE_BLOCKS = frozenset({"image", "image_url", "input_image"})
_HEAD_CHARS = 87_384
"""Base64 characters decoded to find the size (64 KiB: a JPEG's EXIF first)."""
_OPENAI = ("gpt-", "chatgpt", "o1", "o3", "o4", "computer-use")


def image_rule(model: str | None) -> ImageRule | None:
    """The provider whose image rule applies to ``model``, if known."""
    name = base_model_name(model)
    if name.startswith("claude"):
        return "anthropic"
    if name.startswith("gemini"):
        return "gemini"
    if name.startswith(_OPENAI):
        return "openai"
    return None


def image_tokens(block: Mapping[str, Any], rule: ImageRule, flat: int) -> int:
    """Tokens of an image block by ``rule``; ``flat`` when its size is unknown."""
    size = image_size(block)
    if size is None:
        return flat
    width, height = size
    if rule == "anthropic":
        return _anthropic(width, height)
    if rule == "gemini":
        return _gemini(width, height)
    return _openai(width, height, _detail(block))


def _anthropic(width: int, height: int) -> int:
    scale = min(
        1.0, 1_568 / max(width, height), math.sqrt(1_600 * 750 / (width * height))
    )
    return max(1, math.ceil(width * scale * height * scale / 750))


def _openai(width: int, height: int, detail: str | None) -> int:
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    fit = min(1.0, 2_048 / max(w, h))
    w, h = w * fit, h * fit
    short = min(1.0, 768 / min(w, h))
    w, h = w * short, h * short
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def _gemini(width: int, height: int) -> int:
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def _detail(block: Mapping[str, Any]) -> str | None:
    url = block.get("image_url")
    detail = url.get("detail") if isinstance(url, dict) else block.get("detail")
    return detail if isinstance(detail, str) else None


def _data(block: Mapping[str, Any]) -> str | None:
    """The block's base64 data, in any of the shapes LangChain passes on."""
    for value in (block.get("base64"), block.get("data")):
        if isinstance(value, str) and value:
            return value
    source = block.get("source")
    if isinstance(source, dict) and isinstance(source.get("data"), str):
        return str(source["data"])
    url = block.get("image_url", block.get("url"))
    if isinstance(url, dict):
        url = url.get("url")
    if isinstance(url, str) and url.startswith("data:") and "," in url:
        return url.split(",", 1)[1]
    return None


def image_size(block: Mapping[str, Any]) -> tuple[int, int] | None:
    """Width and height of an image block's base64 data (None: unknown)."""
    data = _data(block)
    if data is None:
        return None
    head = data[:_HEAD_CHARS]
    try:
        raw = base64.b64decode(head[: len(head) // 4 * 4])
    except (binascii.Error, ValueError):
        return None
    size = _header_size(raw)
    return size if size is not None and min(size) > 0 else None


def _header_size(raw: bytes) -> tuple[int, int] | None:
    if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24:
        width, height = struct.unpack(">II", raw[16:24])
        return int(width), int(height)
    if raw[:6] in (b"GIF87a", b"GIF89a") and len(raw) >= 10:
        width, height = struct.unpack("<HH", raw[6:10])
        return int(width), int(height)
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return _webp(raw)
    if raw[:2] == b"\xff\xd8":
        return _jpeg(raw)
    return None


def _webp(raw: bytes) -> tuple[int, int] | None:
    chunk = raw[12:16]
    if chunk == b"VP8 " and len(raw) >= 30:
        width, height = struct.unpack("<HH", raw[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L" and len(raw) >= 25:
        bits = int.from_bytes(raw[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(raw) >= 30:
        width = int.from_bytes(raw[24:27], "little") + 1
        return width, int.from_bytes(raw[27:30], "little") + 1
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
"""JPEG start-of-frame markers (they hold the size); the rest of C0-CF are not."""


def _jpeg(raw: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 <= len(raw):
        if raw[i] != 0xFF:
            i += 1
            continue
        kind = raw[i + 1]
        if kind in _SOF:
            height, width = struct.unpack(">HH", raw[i + 5 : i + 9])
            return int(width), int(height)
        if kind == 0xFF or kind == 0x01 or 0xD0 <= kind <= 0xD8:
            i += 1 if kind == 0xFF else 2
            continue
        (length,) = struct.unpack(">H", raw[i + 2 : i + 4])
        i += 2 + length
    return None
