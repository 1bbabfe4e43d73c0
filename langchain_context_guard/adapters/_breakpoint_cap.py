"""Hold a request to Anthropic's 4 ``cache_control`` breakpoints, whoever set them.

The guard's marks are not the only ones: ``AnthropicPromptCachingMiddleware``
(the system message, the last tool and a top-level ``cache_control``),
deepagents' memory middleware (the system message again) and the caller's own
content may add theirs, often in middleware that runs after the guard. Anthropic
refuses a request with more than 4 (``A maximum of 4 blocks with cache_control
may be provided.``), so the count is made on the request body itself, the last
thing built: the agent's model is sent as a copy whose request payload drops
the surplus marks, the messages' oldest first (a later mark caches a longer
prefix), then the system's, then the tools'. The copy is of a subclass made
once per model class, kept while the agent's model is the same object.
"""

from __future__ import annotations

import threading
from typing import Any

from ._cache_control import MAX_BREAKPOINTS

Payload = dict[str, Any]


def _unmarked(block: Any) -> Any:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _marked(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


def count_breakpoints(payload: Payload) -> int:
    """``cache_control`` marks in a Messages API body (the top-level one counts)."""
    system = payload.get("system")
    blocks = list(system) if isinstance(system, list) else []
    blocks += list(payload.get("tools") or [])
    for message in payload.get("messages") or []:
        content = message.get("content")
        blocks += content if isinstance(content, list) else []
    return sum(map(_marked, blocks)) + ("cache_control" in payload)


def _drop(blocks: list[Any], surplus: int) -> tuple[list[Any], int]:
    """``blocks`` with up to ``surplus`` marks removed, first ones first."""
    out = list(blocks)
    for i, block in enumerate(out):
        if surplus and _marked(block):
            out[i] = _unmarked(block)
            surplus -= 1
    return out, surplus


def cap_breakpoints(payload: Payload, limit: int = MAX_BREAKPOINTS) -> Payload:
    """``payload`` with at most ``limit`` marks; itself when within it."""
    surplus = count_breakpoints(payload) - limit
    if surplus <= 0:
        return payload
    out = dict(payload)
    messages = []
    for message in payload.get("messages") or []:
        content = message.get("content")
        if surplus and isinstance(content, list):
            content, surplus = _drop(content, surplus)
            message = {**message, "content": content}
        messages.append(message)
    out["messages"] = messages
    if surplus and isinstance(payload.get("system"), list):
        out["system"], surplus = _drop(payload["system"], surplus)
    if surplus and payload.get("tools"):
        out["tools"], surplus = _drop(payload["tools"], surplus)
    return out


_CAPPED: dict[type[Any], type[Any]] = {}


def _capped_class(cls: type[Any]) -> type[Any]:
    """``cls`` whose request payload is capped (made once per class)."""
    if cls in _CAPPED:
        return _CAPPED[cls]

    def _get_request_payload(self: Any, *args: Any, **kwargs: Any) -> Payload:
        return cap_breakpoints(cls._get_request_payload(self, *args, **kwargs))

    namespace = {"_get_request_payload": _get_request_payload}
    capped = type(cls.__name__, (cls,), {"__module__": cls.__module__, **namespace})
    return _CAPPED.setdefault(cls, capped)


def _anthropic(model: Any) -> bool:
    kind = getattr(model, "_llm_type", "")
    return (
        isinstance(kind, str)
        and kind.startswith("anthropic")
        and bool(getattr(model, "_get_request_payload", None))
    )


class CapBreakpoints:
    """The agent's model held to 4 breakpoints per request (Anthropic models)."""

    def __init__(self) -> None:
        self._last: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def model(self, model: Any) -> Any:
        """``model``'s capped copy; any other model as it is."""
        if not _anthropic(model) or not hasattr(model, "model_copy"):
            return model
        with self._lock:
            last = self._last
            if last is not None and last[0] is model:
                return last[1]
            copy = model.model_copy()
            object.__setattr__(copy, "__class__", _capped_class(type(model)))
            self._last = (model, copy)
            return copy
