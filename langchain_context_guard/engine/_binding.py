"""Which models bind signed reasoning to its prefix, and what the guard learned.

Anthropic documents that Claude Fable 5.1 binds each thinking block to the exact
conversation before it (system prompt, tools, earlier messages) and rejects a
replay once that prefix changed ("The block is bound to a different
conversation"), and that Claude Mythos 5.1, Claude Opus 5, Claude Fable 5 and
every earlier model do not run that check
(https://platform.claude.com/docs/en/models/fable-5-1/whats-new-fable-5-1).
``GuardPolicy.bound_thinking`` left unset follows this table, plus every model a
provider's binding error named since (``BindingMemory``); set, it overrides both.
"""

from __future__ import annotations

import re
import threading

from cachetools import LRUCache

BINDING_MODELS: tuple[str, ...] = ("claude-fable-5-1",)
"""Model ids (and their dated, Bedrock and Vertex forms) that bind their blocks."""
_BINDING = re.compile(
    "|".join(rf"{re.escape(name)}(?![0-9])" for name in BINDING_MODELS)
)
BINDING_ERROR = "bound to a different conversation"
"""What Anthropic's 400 says of a block replayed behind another prefix."""


def binds_in_table(name: str) -> bool:
    """Whether the documented table says model ``name`` binds its blocks."""
    return bool(name) and _BINDING.search(name.lower()) is not None


def is_binding_error(error: BaseException | str) -> bool:
    """Whether a provider error is Anthropic's refusal of a stale bound block."""
    return BINDING_ERROR in str(error)


class BindingMemory:
    """Thread-safe set of the models a provider's binding error named."""

    def __init__(self, maxsize: int = 1_024) -> None:
        self._lock = threading.Lock()
        self._models: LRUCache[str, bool] = LRUCache(maxsize)

    def learn(self, model: str) -> None:
        """Remember that ``model`` binds its blocks."""
        if model:
            with self._lock:
                self._models[model] = True

    def binds(self, model: str) -> bool:
        """Whether ``model`` binds: by the table, or learned from an error."""
        if binds_in_table(model):
            return True
        with self._lock:
            return bool(model) and model in self._models
