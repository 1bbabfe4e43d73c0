"""Ask the provider to compact the conversation itself (a request option).

Anthropic's server-side compaction (the ``compact_20260112`` edit of
``context_management``, beta ``compact-2026-01-12``; Claude Opus and Sonnet 4.6
and later) and OpenAI's Responses compaction (``context_management=[{"type":
"compaction", "compact_threshold": N}]``) summarise the conversation on the
provider's side once its input reaches N tokens, and return a ``compaction``
block (Anthropic) or item (OpenAI) in the reply. The reply is stored like any
other; the guard then sends from the latest block on (``drop_before_compaction``)
and its passes still do the rest: huge results, tool pairs, the budget.

The chat models read ``context_management`` from their own fields, so the option
goes on a copy of the agent's model, kept while the agent's model and the trigger
are the same. A model that cannot take it is sent as it is, with a
``ProviderCompactionWarning`` (once per model and reason) naming the option and
the fix: never a silent no-op.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Callable
from typing import Any

from ..engine import ConfigError

ANTHROPIC_BETA = "compact-2026-01-12"
"""The Anthropic beta that enables the ``compact_20260112`` edit."""
ANTHROPIC_EDIT = "compact_20260112"
ANTHROPIC_MINIMUM = 50_000
"""Anthropic's lowest compaction trigger, in input tokens."""
AUTO_SHARE = 0.8
"""``provider_compaction=True`` compacts at this share of the guard's budget."""
_CLAUDE = re.compile(r"claude-(?:opus|sonnet)-(\d+)(?:-(\d{1,2}))?(?:\D|$)")


class ProviderCompactionWarning(UserWarning):
    """``provider_compaction`` was not sent for a model (which, why, the fix)."""


def check_trigger(value: Any) -> int | None:
    """``provider_compaction``'s trigger: tokens, ``None`` for automatic."""
    if value is True:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(
            f"provider_compaction must be True or a positive number of input "
            f"tokens, got {value!r}.",
            field="provider_compaction",
            hint="pass provider_compaction=True (at 0.8 of the guard's budget) or "
            "provider_compaction=100_000.",
        )
    return value


def provider_of(model: Any) -> str | None:
    """``"anthropic"`` or ``"openai"`` for a chat model that takes the option."""
    fields = getattr(type(model), "model_fields", {})
    if "context_management" not in fields:
        return None
    if "betas" in fields:
        return "anthropic"
    if "use_responses_api" in fields:
        return "openai"
    return None


def anthropic_supports(name: str) -> bool:
    """Whether a Claude model name is Opus or Sonnet 4.6 or later."""
    found = _CLAUDE.search(name)
    if found is None:
        return False
    major, minor = int(found.group(1)), int(found.group(2) or 0)
    return (major, minor) >= (4, 6)


class ProviderCompaction:
    """The agent's model asking its provider to compact (see the module)."""

    def __init__(self, trigger: int | None, budget: Callable[[Any], int]) -> None:
        self.trigger = trigger
        self._budget = budget
        self._last: tuple[Any, int, Any] | None = None
        self._warned: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def model(self, model: Any) -> Any:
        """``model``'s copy asking for compaction, or ``model`` with a warning."""
        provider = provider_of(model)
        name = str(getattr(model, "model_name", None) or getattr(model, "model", ""))
        budget = self._budget(model)
        trigger = self.trigger or int(AUTO_SHARE * budget)
        why = self._unsupported(provider, name, trigger, budget)
        if why is not None:
            self._warn(name or type(model).__name__, why)
            return model
        with self._lock:
            last = self._last
            if last is not None and last[0] is model and last[1] == trigger:
                return last[2]
            copy = _with_compaction(model, provider, trigger)
            self._last = (model, trigger, copy)
            return copy

    def _unsupported(
        self, provider: str | None, name: str, trigger: int, budget: int
    ) -> str | None:
        """Why the option cannot be sent for this model (None: it can)."""
        if provider is None:
            return (
                "it has no provider-side compaction (ChatAnthropic with Claude "
                "Opus/Sonnet 4.6 or later, or ChatOpenAI on the Responses API)"
            )
        if provider == "anthropic" and not anthropic_supports(name):
            return (
                "Anthropic compacts on the server for Claude Opus/Sonnet 4.6 and later"
            )
        if provider == "anthropic" and trigger < ANTHROPIC_MINIMUM:
            return (
                f"its trigger ({trigger:,} tokens) is under Anthropic's minimum of "
                f"{ANTHROPIC_MINIMUM:,}"
            )
        if trigger >= budget:
            return (
                f"its trigger ({trigger:,} tokens) is not under the guard's budget "
                f"({budget:,}): the guard prunes before the provider would compact"
            )
        return None

    def _warn(self, name: str, why: str) -> None:
        with self._lock:
            if (name, why) in self._warned:
                return
            self._warned.add((name, why))
        warnings.warn(
            f"provider_compaction is not sent for {name}: {why}. The guard's passes "
            "still keep each call inside the window. Fix: use such a model and "
            "trigger, or drop provider_compaction (CompactionMiddleware compacts "
            "with any model).",
            ProviderCompactionWarning,
            stacklevel=4,
        )


def _with_compaction(model: Any, provider: str | None, trigger: int) -> Any:
    """A copy of ``model`` whose requests carry the provider's compaction option."""
    current = model.context_management
    if provider == "anthropic":
        edits = [
            e
            for e in (current or {}).get("edits", [])
            if e.get("type") != ANTHROPIC_EDIT
        ]
        edit = {
            "type": ANTHROPIC_EDIT,
            "trigger": {"type": "input_tokens", "value": trigger},
        }
        betas = list(model.betas or [])
        return model.model_copy(
            update={
                "context_management": {**(current or {}), "edits": [*edits, edit]},
                "betas": betas if ANTHROPIC_BETA in betas else [*betas, ANTHROPIC_BETA],
            }
        )
    items = [i for i in current or [] if i.get("type") != "compaction"]
    item = {"type": "compaction", "compact_threshold": trigger}
    return model.model_copy(update={"context_management": [*items, item]})
