"""The window guard: resolve a model's window and refuse tiny ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._errors import WindowTooSmallError

WindowSource = Literal["override", "learned", "model_profile", "table", "default"]

# Input windows of widely used models, matched by name prefix (longest first).
KNOWN_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 272_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude": 200_000,
    "gemini": 1_048_576,
    "mistral-large": 128_000,
    "mistral-small": 32_000,
    "deepseek": 128_000,
    "llama-3": 128_000,
    "qwen": 131_072,
}


@dataclass(frozen=True)
class WindowInfo:
    """A resolved context window, where it came from, and whether to warn."""

    tokens: int
    source: WindowSource
    should_warn: bool = False


def model_name(model: Any) -> str | None:
    """The model identifier of a chat model object or a string."""
    if model is None or isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def _from_profile(model: Any) -> int | None:
    profile = getattr(model, "profile", None)
    if isinstance(profile, dict):
        value = profile.get("max_input_tokens")
        if isinstance(value, int) and value > 0:
            return value
    return None


def _from_table(name: str | None) -> int | None:
    if not name:
        return None
    key = name.lower().rsplit("/", 1)[-1]
    for prefix in sorted(KNOWN_WINDOWS, key=len, reverse=True):
        if key.startswith(prefix):
            return KNOWN_WINDOWS[prefix]
    return None


def resolve_window(
    *,
    override: int | None,
    model: Any = None,
    default: int,
    learned: int | None = None,
) -> tuple[int, WindowSource]:
    """The window in tokens: override, learned limit, profile, table, then default.

    A limit learned from a provider's overflow error caps even an explicit
    override (the provider has just said the override is too large).
    """
    if override:
        if learned and learned < override:
            return learned, "learned"
        return override, "override"
    if learned:
        return learned, "learned"
    profile = _from_profile(model)
    if profile:
        return profile, "model_profile"
    table = _from_table(model_name(model))
    if table:
        return table, "table"
    return default, "default"


def check_window(
    tokens: int, source: WindowSource, *, hard_min: int, warn_below: int
) -> WindowInfo:
    """Refuse windows below ``hard_min``; flag those below ``warn_below``."""
    if tokens < hard_min:
        raise WindowTooSmallError(tokens, hard_min, source)
    return WindowInfo(tokens, source, should_warn=tokens < warn_below)
