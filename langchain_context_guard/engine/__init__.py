"""The pruning engine: policy, token accounting, the passes and ``ContextGuard``.

Owns everything that decides what a model is sent. It may import langchain-core,
tiktoken, pydantic and the standard library only; never a sibling subpackage
(``adapters``, ``compaction``, ``recovery``, ``replay``, ``cli``), not even
lazily: they build on it. ``tests/test_layout.py`` checks this.

Reading order: ``_policy`` (the settings), ``_tokens`` (counting), the passes
(``_sanitize``, ``_repair``, ``_truncate``, ``_compress``, ``_thinking``,
``_trim``, ``_hygiene``), ``_passes`` (their order and why), then ``_guard``
(``ContextGuard.prepare``). ``_stages``, ``_pipeline`` and ``_stable`` are how
the same passes are made incremental and cache-friendly.
"""

from ._anchor import UsageMissingWarning, count_messages
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
from ._events import GuardEvent, GuardReport, PrepareResult
from ._guard import ContextGuard
from ._hygiene import enforce_provider_hygiene
from ._messages import MARKER_KEY
from ._overflow import OverflowInfo, classify_overflow, silent_overflow
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
)
from ._trim import trim_to_budget
from ._truncate import truncate_tool_results
from ._window import WindowInfo

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
    "UsageMissingWarning",
    "WindowInfo",
    "WindowTooSmallError",
    "classify_overflow",
    "compress_lines",
    "compress_old_tool_results",
    "count_messages",
    "enforce_provider_hygiene",
    "repair_tool_pairs",
    "sanitize_messages",
    "silent_overflow",
    "strip_old_thinking",
    "trim_to_budget",
    "truncate_text",
    "truncate_tool_results",
]
