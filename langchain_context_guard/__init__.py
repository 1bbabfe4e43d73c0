"""Keep a LangChain/LangGraph agent's message history inside its context window.

The engine (``ContextGuard`` and its passes) needs only langchain-core; the LangGraph
adapters ship with the core install; the ``create_agent`` middlewares need the
``agents`` extra and are imported lazily from here.
"""

import logging
from typing import Any

from ._compress import compress_old_tool_results
from ._errors import (
    BudgetExceededError,
    CompactionError,
    ConfigError,
    ContextGuardError,
    ContextOverflowError,
    InvalidInputError,
    WindowTooSmallError,
)
from ._events import GuardEvent, GuardReport
from ._guard import ContextGuard, PrepareResult
from ._hygiene import enforce_provider_hygiene
from ._messages import MARKER_KEY
from ._overflow import OverflowInfo, classify_overflow
from ._policy import GuardPolicy
from ._repair import repair_tool_pairs
from ._sanitize import sanitize_messages
from ._text import compress_lines, truncate_text
from ._thinking import strip_old_thinking
from ._tokens import (
    CallableCounter,
    TiktokenCounter,
    TokenCounter,
    TokenizerFallbackWarning,
    count_messages,
)
from ._trim import trim_to_budget
from ._truncate import truncate_tool_results
from ._window import WindowInfo
from .compaction import (
    CompactionSettings,
    Compactor,
    acompact_messages,
    compact_messages,
)
from .compaction_graph import add_compaction, make_recall_tool
from .langgraph import guard_node, pre_model_hook
from .recovery import OverflowRecoveryRunnable, with_overflow_recovery
from .runnable import GuardRunnable, as_runnable

logging.getLogger(__name__).addHandler(logging.NullHandler())

_LAZY = {
    "CompactionMiddleware": ".compaction_middleware",
    "ContextGuardMiddleware": ".middleware",
    "OverflowRecoveryMiddleware": ".recovery_middleware",
}


def __getattr__(name: str) -> Any:
    """Import the optional ``create_agent`` middlewares on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "MARKER_KEY",
    "BudgetExceededError",
    "CallableCounter",
    "CompactionError",
    "CompactionMiddleware",
    "CompactionSettings",
    "Compactor",
    "ConfigError",
    "ContextGuard",
    "ContextGuardError",
    "ContextGuardMiddleware",
    "ContextOverflowError",
    "GuardEvent",
    "GuardPolicy",
    "GuardReport",
    "GuardRunnable",
    "InvalidInputError",
    "OverflowInfo",
    "OverflowRecoveryMiddleware",
    "OverflowRecoveryRunnable",
    "PrepareResult",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerFallbackWarning",
    "WindowInfo",
    "WindowTooSmallError",
    "__version__",
    "acompact_messages",
    "add_compaction",
    "as_runnable",
    "classify_overflow",
    "compact_messages",
    "compress_lines",
    "compress_old_tool_results",
    "count_messages",
    "enforce_provider_hygiene",
    "guard_node",
    "make_recall_tool",
    "pre_model_hook",
    "repair_tool_pairs",
    "sanitize_messages",
    "strip_old_thinking",
    "trim_to_budget",
    "truncate_text",
    "truncate_tool_results",
    "with_overflow_recovery",
]
