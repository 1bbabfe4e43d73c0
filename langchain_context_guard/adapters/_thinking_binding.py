"""Ask Anthropic to drop stale signed thinking itself (a beta request option).

Newer Claude models bind each signed thinking block to the conversation before
it. The engine already removes the blocks its own edits make stale
(``GuardPolicy.bound_thinking``); with ``thinking.block_binding.
prefix_mismatch_behavior = "drop_block"`` the API also drops any other stale
block (one an edit outside the guard made) instead of refusing the request, and
reports it in ``input_transformations``. langchain-anthropic applies the
model's own ``thinking`` over any request keyword, so the option goes on a copy
of the model, kept while the agent's model is the same object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

BINDING_BETA = "thinking-binding-controls-2026-08-01"
"""The Anthropic beta that enables ``thinking.block_binding``."""
DROP_BLOCK: dict[str, str] = {"prefix_mismatch_behavior": "drop_block"}


class DropStaleThinking:
    """The agent's model asking for ``drop_block`` (Anthropic, thinking on)."""

    def __init__(self, binds: Callable[[Any], bool] | None = None) -> None:
        """``binds``: ask only for the models it says bind (None: for every one)."""
        self._binds = binds
        self._last: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def model(self, model: Any) -> Any:
        """``model``'s copy asking for ``drop_block``; ``model`` itself otherwise.

        Only a chat model with a ``thinking`` setting that is on and ``betas``
        (``ChatAnthropic`` and its subclasses) gets one; any other model is
        sent as it is.
        """
        thinking = getattr(model, "thinking", None)
        if (
            not isinstance(thinking, dict)
            or thinking.get("type") == "disabled"
            or not hasattr(model, "betas")
            or not hasattr(model, "model_copy")
            or (self._binds is not None and not self._binds(model))
        ):
            return model
        with self._lock:
            last = self._last
            if last is not None and last[0] is model:
                return last[1]
            betas = list(model.betas or [])
            copy = model.model_copy(
                update={
                    "thinking": {**thinking, "block_binding": dict(DROP_BLOCK)},
                    "betas": betas if BINDING_BETA in betas else [*betas, BINDING_BETA],
                }
            )
            self._last = (model, copy)
            return copy


def drop_stale_thinking_model(model: Any) -> Any:
    """``model``'s copy asking for ``drop_block``.

    ``model`` itself where it asks already or cannot (not an Anthropic model
    with thinking on).
    """
    thinking = getattr(model, "thinking", None)
    if isinstance(thinking, dict) and thinking.get("block_binding") == DROP_BLOCK:
        return model
    return DropStaleThinking().model(model)
