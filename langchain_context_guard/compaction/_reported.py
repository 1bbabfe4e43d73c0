"""The provider's own count of the last call, as LangChain's trigger reads it.

``SummarizationMiddleware`` also triggers when the last assistant message's
``usage_metadata["total_tokens"]`` reaches a token threshold, provided the message
came from the model's provider: its ``response_metadata["model_provider"]`` is the
model's LangSmith ``ls_provider``, or one of that provider's known aliases.
``reported_tokens`` gives that figure (0 when it does not apply), so a token or
fraction size is reached when either count reaches it, inside ``AND`` clauses too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableBinding

PROVIDER_ALIASES: dict[str, frozenset[str]] = {
    "amazon_bedrock": frozenset({"bedrock", "bedrock_converse"}),
    "openai-mantle": frozenset({"openai"}),
    "anthropic-mantle": frozenset({"anthropic"}),
}
"""Per ``ls_provider``, the ``model_provider`` names its messages may carry."""


def ls_provider(model: Any) -> str | None:
    """The LangSmith provider name of a chat model (bound or not), if it has one."""
    while isinstance(model, RunnableBinding):
        model = model.bound
    params = getattr(model, "_get_ls_params", None)
    if params is None:
        return None
    try:
        name = params().get("ls_provider")
    except Exception:  # a model whose params need arguments it was not given
        return None
    return name if isinstance(name, str) else None


def provider_matches(message_provider: str, model_provider: str | None) -> bool:
    """Whether a message's ``model_provider`` is the model's provider or an alias."""
    if model_provider is None:
        return False
    if message_provider == model_provider:
        return True
    return message_provider in PROVIDER_ALIASES.get(model_provider, frozenset())


def reported_tokens(messages: Sequence[BaseMessage], model: Any) -> int:
    """The last assistant message's reported total, when its provider is ``model``'s.

    0 when the last assistant message reports no usage (a kept reply loses its
    usage at a compaction), or names no provider or another one.
    """
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    if last is None or not last.usage_metadata:
        return 0
    total = int(last.usage_metadata.get("total_tokens", 0) or 0)
    provider = last.response_metadata.get("model_provider")
    if total <= 0 or not isinstance(provider, str):
        return 0
    return total if provider_matches(provider, ls_provider(model)) else 0
