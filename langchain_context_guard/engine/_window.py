"""The window guard: resolve a model's window and refuse tiny ones."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ._errors import WindowTooSmallError
from ._events import GuardEvent

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


# ``init_chat_model``'s providers: "openai:gpt-4.1" names gpt-4.1 at openai.
PROVIDERS = frozenset(
    {
        "anthropic",
        "anthropic_bedrock",
        "azure_ai",
        "azure_openai",
        "baseten",
        "bedrock",
        "bedrock_converse",
        "bedrock_mantle_anthropic",
        "bedrock_mantle_openai",
        "cerebras",
        "cohere",
        "deepseek",
        "fireworks",
        "google_anthropic_vertex",
        "google_genai",
        "google_vertexai",
        "groq",
        "huggingface",
        "ibm",
        "langsmith",
        "litellm",
        "meta",
        "mistralai",
        "nvidia",
        "ollama",
        "openai",
        "openrouter",
        "perplexity",
        "together",
        "xai",
    }
)


@dataclass(frozen=True)
class WindowInfo:
    """A resolved context window, where it came from, and whether to warn."""

    tokens: int
    source: WindowSource
    should_warn: bool = False


def split_provider(name: str) -> tuple[str | None, str]:
    """``"openai:gpt-4.1"`` -> ``("openai", "gpt-4.1")``; other names unchanged.

    Only a known provider counts as a prefix (as in ``init_chat_model``), so
    Ollama tags (``llama3:8b``) and Bedrock ids (``...-v1:0``) stay whole.
    """
    head, sep, tail = name.partition(":")
    if sep and head.lower() in PROVIDERS and tail:
        return head.lower(), tail
    return None, name


def base_model_name(name: str | None) -> str:
    """The bare model name: no provider prefix, no ``org/`` path, lower case."""
    return split_provider(name or "")[1].lower().rsplit("/", 1)[-1]


def model_name(model: Any) -> str | None:
    """The model identifier of a chat model object or a string."""
    if model is None or isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def limit_key(model: Any, name: str | None = None) -> str:
    """The name a limit learned for ``model`` is kept under (``name`` if it has none).

    The bare model name ("" if none), so ``"openai:gpt-4.1"``, ``"gpt-4.1"`` and
    a chat model whose ``model_name`` is ``gpt-4.1`` share what was learned, and
    a guard used with two models keeps one limit for each.
    """
    return base_model_name(model_name(model) or name)


def _from_profile(model: Any) -> int | None:
    profile = getattr(model, "profile", None)
    if isinstance(profile, dict):
        value = profile.get("max_input_tokens")
        if isinstance(value, int) and value > 0:
            return value
    return None


def output_reserve(model: Any, window: int) -> int | None:
    """Tokens the model may write, from its ``max_tokens`` when set and sane.

    Providers such as Anthropic reject a request whose input plus ``max_tokens``
    exceeds the window, so that is what must stay free. ``None`` when the model
    sets no limit (or one that leaves no room for input).
    """
    if model is None or isinstance(model, str):
        return None
    for attr in ("max_tokens", "max_output_tokens", "max_completion_tokens"):
        try:
            value = getattr(model, attr, None)
        except Exception:
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value if value < window else None
    return None


def _from_table(name: str | None) -> int | None:
    if not name:
        return None
    key = base_model_name(name)
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
    """Refuse windows below ``hard_min``; flag those below ``warn_below``.

    A learned window is the provider's own statement, not a guess: never refused.
    """
    if tokens < hard_min and source != "learned":
        raise WindowTooSmallError(tokens, hard_min, source)
    return WindowInfo(tokens, source, should_warn=tokens < warn_below)


def window_warning(info: WindowInfo, budget: int, recommended: int) -> GuardEvent:
    """The event for a window below ``recommended`` (``warn_below_tokens``)."""
    return GuardEvent(
        "window_warning",
        budget=budget,
        detail=f"context window {info.tokens:,} tokens (from {info.source}) is "
        f"below the recommended {recommended:,}",
    )


def default_reserve(window: int, cap: int = 8_192) -> int:
    """The reply reserve when none is set: an eighth of the window, at most ``cap``.

    2,000 of a 16k window, 4,000 of 32k, 8,192 from 64k up: a small window keeps
    most of itself for the history, a large one the room of a long reply.
    """
    return min(window // 8, cap)
