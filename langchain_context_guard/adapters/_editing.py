"""LangChain's ``ContextEditingMiddleware`` vocabulary, mapped onto the guard.

``ContextGuardMiddleware(edits=[ClearToolUsesEdit(keep=5)])``, or the same names as
keywords (``keep=5, exclude_tools=["read_file"]``). Where they map:

- ``keep``: ``keep_recent_tool_results`` (the newest results stay whole);
- ``trigger`` (tokens): ``compress_trigger``, that share of the budget once the
  model's window is known;
- ``exclude_tools``: those tools' results are marked ``kept_whole`` for the
  guard, so no pass truncates or compresses them, and are sent as given.

``clear_at_least``, ``clear_tool_inputs=True`` and a ``placeholder`` of its own have
no equivalent: each raises ``ConfigError`` saying what to use instead.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache
from langchain.agents.middleware import ClearToolUsesEdit
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ..engine import MARKER_KEY, ConfigError, kept_whole

EDIT_NAMES = (
    "edits",
    "trigger",
    "keep",
    "clear_at_least",
    "clear_tool_inputs",
    "exclude_tools",
    "placeholder",
)
"""``ContextEditingMiddleware``'s (and ``ClearToolUsesEdit``'s) names."""

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(ClearToolUsesEdit)}

# A name with no equivalent here, when set: why, and what to use instead.
_UNMAPPED = {
    "clear_at_least": (
        "old tool results are compressed a batch at a time, not until a number "
        "of tokens is reclaimed",
        "leave clear_at_least at 0; compress_batch=N sets how many results "
        "are compressed at once.",
    ),
    "clear_tool_inputs": (
        "tool call arguments are always kept: they hold the paths and commands "
        "an agent uses again",
        "leave clear_tool_inputs False; compress_assistant_text=True (the "
        "default) shrinks the text written around old calls.",
    ),
    "placeholder": (
        "a compressed result keeps its first and last lines and a marker with "
        "its original size, whose text is fixed",
        "leave placeholder unset; compress_head_lines and compress_tail_lines "
        "set how much of each old result stays.",
    ),
}


@dataclass
class Editing:
    """What ``ContextEditingMiddleware``'s names asked for, in the guard's terms."""

    settings: dict[str, Any]
    """``GuardPolicy`` fields (``keep_recent_tool_results``)."""
    trigger: int | None = None
    """Tokens before old results are compressed; becomes ``compress_trigger``."""
    exclude: frozenset[str] = frozenset()
    _copies: LRUCache[int, tuple[BaseMessage, BaseMessage]] = field(
        default_factory=lambda: LRUCache(4_096)
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def compress_trigger(self, budget: int) -> dict[str, float]:
        """``compress_trigger`` for ``trigger`` tokens of ``budget``."""
        if self.trigger is None:
            return {}
        return {"compress_trigger": min(self.trigger / max(budget, 1), 1.0)}

    def mark(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """The excluded tools' results marked ``kept_whole`` (same copy each call)."""
        if not self.exclude:
            return messages
        names = {
            call["id"]: call["name"]
            for m in messages
            if isinstance(m, AIMessage)
            for call in m.tool_calls
        }
        out = list(messages)
        for i, m in enumerate(messages):
            if isinstance(m, ToolMessage) and not kept_whole(m):
                if (m.name or names.get(m.tool_call_id)) in self.exclude:
                    out[i] = self._copy(m)
        return out

    def _copy(self, message: ToolMessage) -> BaseMessage:
        with self._lock:
            held = self._copies.get(id(message))
            if held is None or held[0] is not message:
                copy = message.model_copy(
                    update={
                        "additional_kwargs": {
                            **message.additional_kwargs,
                            MARKER_KEY: {"kind": "kept_whole"},
                        }
                    }
                )
                held = self._copies[id(message)] = (message, copy)
            return held[1]

    def restore(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        """``messages`` with each marked copy back to the caller's own message."""
        if not self.exclude:
            return messages
        with self._lock:
            originals = {id(copy): m for m, copy in self._copies.values()}
        return [originals.get(id(m), m) for m in messages]


def read_editing(given: dict[str, Any], *, ready: bool = False) -> Editing | None:
    """Take ``ContextEditingMiddleware``'s names out of ``given`` (keywords).

    ``ready``: the middleware got a ready ``ContextGuard``, whose policy a
    ``trigger`` cannot change.
    """
    if not any(name in given for name in EDIT_NAMES):
        return None
    edits = given.pop("edits", None)
    values = {n: given.pop(n) for n in EDIT_NAMES[1:] if n in given}
    if edits is not None:
        if values:
            raise ConfigError(
                f"Got edits= and also {', '.join(sorted(values))}.",
                field="edits",
                hint="set them on the ClearToolUsesEdit, or pass keywords only.",
            )
        values = _edit_values(edits)
    for name, (why, instead) in _UNMAPPED.items():
        if name in values and values[name] != _DEFAULTS[name]:
            raise ConfigError(
                f"ContextGuardMiddleware cannot honour {name}={values[name]!r}: {why}.",
                field=name,
                hint=instead,
            )
    settings: dict[str, Any] = {}
    if "keep" in values:
        settings["keep_recent_tool_results"] = _count(values["keep"], "keep", 0)
    trigger = values.get("trigger")
    if trigger is not None and ready:
        raise ConfigError(
            "Got a ready ContextGuard and also trigger.",
            field="trigger",
            hint="set compress_trigger on the guard's policy, or pass no guard.",
        )
    exclude = values.get("exclude_tools", ())
    if isinstance(exclude, str) or not all(isinstance(n, str) for n in exclude):
        raise ConfigError(
            f"exclude_tools must be a list of tool names, got {exclude!r}.",
            field="exclude_tools",
            hint='write exclude_tools=["read_file"].',
        )
    return Editing(
        settings,
        None if trigger is None else _count(trigger, "trigger", 1),
        frozenset(exclude),
    )


def _edit_values(edits: Any) -> dict[str, Any]:
    edits = list(edits) if isinstance(edits, Sequence) else [edits]
    if len(edits) != 1 or not isinstance(edits[0], ClearToolUsesEdit):
        raise ConfigError(
            f"ContextGuardMiddleware takes one ClearToolUsesEdit, got {edits!r}.",
            field="edits",
            hint="pass edits=[ClearToolUsesEdit(...)] (other edits have no "
            "equivalent here), or its fields as keywords.",
        )
    return {name: getattr(edits[0], name) for name in _DEFAULTS}


def _count(value: Any, name: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(
            f"{name} must be a whole number of at least {least}, got {value!r}.",
            field=name,
            hint=f"write {name}={max(least, 3)}.",
        )
    return value
