"""Old images offloaded: the newest stay whole, older ones become a pointer."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from langchain_context_guard import ContextGuard, GuardPolicy, offload_old_images
from langchain_context_guard.engine import old_images
from langchain_context_guard.engine.passes._images import image_key, image_pointer


def image(k: int) -> dict[str, Any]:
    return {"type": "image", "base64": f"AAAA{k:04d}", "mime_type": "image/png"}


def shots(n: int) -> list[BaseMessage]:
    """``n`` user turns, each sharing one screenshot, answered in text."""
    out: list[BaseMessage] = []
    for k in range(n):
        text = {"type": "text", "text": f"Screen {k}:"}
        out += [HumanMessage([text, image(k)], id=f"u{k}"), AIMessage(f"Seen {k}.")]
    return out


def images_in(messages: list[BaseMessage]) -> list[Any]:
    return [
        b
        for m in messages
        if isinstance(m.content, list)
        for b in m.content
        if isinstance(b, dict) and b.get("type") == "image"
    ]


@pytest.mark.parametrize("keep", [0, 1, 2, 5])
def test_the_newest_images_stay_whole_and_older_ones_point_to_the_archive(
    keep: int,
) -> None:
    history = shots(4)
    out = offload_old_images(history, keep)
    assert images_in(out) == [image(k) for k in range(4)][4 - min(keep, 4) :]
    gone = [image(k) for k in range(4 - min(keep, 4))]
    for k, block in enumerate(gone):
        assert out[2 * k].content[1] == {  # type: ignore[index]
            "type": "text",
            "text": image_pointer(image_key(block)),
        }
        assert out[2 * k].id == f"u{k}"
    assert list(old_images(history, keep).values()) == gone
    assert images_in(history) == [image(k) for k in range(4)]  # input unchanged


def test_nothing_to_offload_returns_the_same_list() -> None:
    history = shots(2)
    assert offload_old_images(history, 2) is history
    assert old_images(history, 2) == {}


def test_the_same_image_gets_the_same_key_every_call() -> None:
    history = shots(3)
    assert offload_old_images(history, 1) == offload_old_images(list(history), 1)
    assert image_key(image(0)) == image_key(dict(image(0)))
    assert image_key(image(0)) != image_key(image(1))
    assert image_pointer(image_key(image(0))).startswith(
        '[image offloaded by context guard; view it again: view_image("img_'
    )


def test_the_guard_counts_a_pointer_far_below_an_image() -> None:
    guard = ContextGuard(GuardPolicy(image_tokens=1_600))
    history = shots(6)
    whole = guard.count_tokens(history)
    sent = guard.count_tokens(offload_old_images(history, 2))
    assert whole - sent > 4 * (1_600 - 40)  # four images, each now ~30 tokens
