"""Keep a LangChain/LangGraph agent's message history inside its context window."""

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

__version__ = "0.1.0"

__all__ = [
    "MARKER_KEY",
    "BudgetExceededError",
    "CallableCounter",
    "CompactionError",
    "ConfigError",
    "ContextGuard",
    "ContextGuardError",
    "ContextOverflowError",
    "GuardEvent",
    "GuardPolicy",
    "GuardReport",
    "InvalidInputError",
    "OverflowInfo",
    "PrepareResult",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerFallbackWarning",
    "WindowInfo",
    "WindowTooSmallError",
    "__version__",
    "classify_overflow",
    "compress_lines",
    "compress_old_tool_results",
    "count_messages",
    "enforce_provider_hygiene",
    "repair_tool_pairs",
    "sanitize_messages",
    "strip_old_thinking",
    "trim_to_budget",
    "truncate_text",
    "truncate_tool_results",
]
