"""Images counted by their provider's documented rule, from the image's own size."""

from __future__ import annotations

import base64
import struct
import zlib

import pytest
from langchain_core.messages import HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy, offload_old_images
from langchain_context_guard.engine.tokens._image_cost import (
    image_rule,
    image_size,
    image_tokens,
)

DATA = "data:image/png;base64,"


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = struct.pack(">I", zlib.crc32(kind + data))
    return struct.pack(">I", len(data)) + kind + data + crc


def png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header) + _chunk(b"IEND", b"")


def jpeg(width: int, height: int) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x01" * 9
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 8


def webp(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


def block(data: bytes, **extra: object) -> dict[str, object]:
    text = base64.b64encode(data).decode()
    return {"type": "image", "base64": text, "mime_type": "image/png", **extra}


@pytest.mark.parametrize("make", [png, jpeg, gif, webp], ids=lambda f: f.__name__)
def test_the_size_is_read_from_the_image_header(make):
    assert image_size(block(make(1_366, 768))) == (1_366, 768)


@pytest.mark.parametrize(
    "shape",
    [
        lambda b: {"type": "image", "source_type": "base64", "data": b},
        lambda b: {"type": "image", "source": {"type": "base64", "data": b}},
        lambda b: {
            "type": "image_url",
            "image_url": {"url": f"data:image/png;base64,{b}"},
        },
        lambda b: {"type": "input_image", "image_url": f"data:image/png;base64,{b}"},
    ],
    ids=["langchain-data", "anthropic-source", "openai-chat", "openai-responses"],
)
def test_every_block_shape_gives_its_size(shape):
    data = base64.b64encode(png(640, 480)).decode()
    assert image_size(shape(data)) == (640, 480)


# The providers' own worked examples (module docstring of ``_image_cost``).
@pytest.mark.parametrize(
    ("rule", "size", "detail", "tokens"),
    [
        ("anthropic", (200, 200), None, 54),
        ("anthropic", (1_000, 1_000), None, 1_334),
        ("anthropic", (1_092, 1_092), None, 1_590),
        ("anthropic", (4_000, 3_000), None, 1_600),  # scaled down first
        ("openai", (1_024, 1_024), "high", 765),
        ("openai", (2_048, 4_096), "high", 1_105),
        ("openai", (4_096, 8_192), "low", 85),
        ("gemini", (384, 384), None, 258),
        ("gemini", (600, 400), None, 258),
        ("gemini", (1_920, 1_080), None, 258 * 3 * 2),
    ],
)
def test_each_provider_rule_gives_its_documented_figure(rule, size, detail, tokens):
    image = block(png(*size), **({"detail": detail} if detail else {}))
    assert image_tokens(image, rule, flat=1_600) == tokens


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("anthropic:claude-sonnet-4-5", "anthropic"),
        ("openai:gpt-4.1", "openai"),
        ("o4-mini", "openai"),
        ("google_genai:gemini-2.5-pro", "gemini"),
        ("llama-3.1-70b", None),
        (None, None),
    ],
)
def test_the_rule_follows_the_model_name(model, rule):
    assert image_rule(model) == rule


def test_a_guard_counts_an_image_by_its_models_rule_and_a_url_at_the_flat_cost():
    small = HumanMessage([{"type": "text", "text": "see"}, block(png(200, 200))])
    by_url = HumanMessage(
        [{"type": "text", "text": "see"}, {"type": "image", "url": "https://x/y.png"}]
    )
    text = HumanMessage([{"type": "text", "text": "see"}])
    flat = ContextGuard(GuardPolicy(image_tokens=1_600))  # no model: flat
    claude = ContextGuard(GuardPolicy(image_tokens=1_600), model="claude-sonnet-4-5")
    base = claude.count_tokens([text])
    assert claude.count_tokens([small]) - base == 54
    assert claude.count_tokens([by_url]) - base == 1_600  # size unknown: flat
    assert flat.count_tokens([small]) - flat.count_tokens([text]) == 1_600


def test_offloading_an_old_image_saves_what_its_provider_charges():
    history = [
        HumanMessage([{"type": "text", "text": f"screen {k}"}, block(png(1_024, 768))])
        for k in range(3)
    ]
    sent = offload_old_images(history, keep=1)
    gpt = ContextGuard(GuardPolicy(), model="gpt-4.1")
    pointers = gpt.count_tokens(sent[:2]) - gpt.count_tokens(
        [HumanMessage([{"type": "text", "text": f"screen {k}"}]) for k in range(2)]
    )
    saved = gpt.count_tokens(history) - gpt.count_tokens(sent)
    assert saved == 2 * 765 - pointers  # two 1,024 x 768 images, 765 each
