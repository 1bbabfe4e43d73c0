"""The pruning engine: policy, token accounting, the passes and ``ContextGuard``.

Owns everything that decides what a model is sent. It may import langchain-core,
tiktoken, pydantic and the standard library only; never a sibling subpackage
(``adapters``, ``compaction``, ``recovery``, ``replay``, ``cli``), not even
lazily: they build on it. ``tests/test_layout.py`` checks this.

Reading order: ``_reference`` first (``reference_prune``: what a pruning does,
the passes as plain calls, in order, and why), then ``_policy`` (the settings),
``_counters`` (counting), the passes it calls (``_sanitize``, ``_repair``,
``_truncate``, ``_compress``, ``_thinking``, ``_trim``, ``_digest``,
``_hygiene``), then ``_guard`` (``ContextGuard.prepare``). ``_steps``,
``_run``, ``_prune`` and ``_stable_prefix`` are how the same passes are made
incremental and cache-friendly; ``tests/engine/test_reference.py`` holds their
output equal to the reference's.
"""

# For the library's own subpackages, which meet the engine here (not public API).
from ._archive_defaults import ARCHIVE_DEFAULTS
from ._binding import BINDING_MODELS as BINDING_MODELS
from ._binding import is_binding_error as is_binding_error
from ._context_usage import ContextUsage
from ._context_usage import usage_notice as usage_notice
from ._errors import (
    BudgetExceededError,
    CompactionError,
    ConfigError,
    ContextGuardError,
    ContextOverflowError,
    InvalidInputError,
    WindowTooSmallError,
)
from ._errors import unknown_setting as unknown_setting
from ._events import GuardEvent, GuardReport, PrepareResult
from ._events import diff_event as diff_event
from ._events import log_event as log_event
from ._guard import ContextGuard
from ._input import to_messages as to_messages
from ._interactive import app_message
from ._messages import MARKER_KEY, is_app_message, is_pinned
from ._messages import final_tool_turn as final_tool_turn
from ._messages import holds_reply as holds_reply
from ._messages import is_summary as is_summary
from ._messages import is_user as is_user
from ._messages import kept_whole as kept_whole
from ._messages import label as label
from ._messages import marker as marker
from ._messages import same_list as same_list
from ._messages import text_of as text_of
from ._messages import without_usage as without_usage
from ._overflow import OverflowInfo, classify_overflow, silent_overflow
from ._overflow import scaled_limit as scaled_limit
from ._pins import find_message as find_message
from ._pins import pin, pin_update, unpin
from ._policy import GuardPolicy
from ._quoting import DELIMITER as DELIMITER
from ._quoting import escape_delimiters as escape_delimiters
from ._quoting import normalize as normalize
from ._quoting import quote as quote
from ._reference import reference_prepare, reference_prune
from ._result_keys import TURN as TURN
from ._result_keys import keys_in_ranges as keys_in_ranges
from ._result_keys import parse_result_key as parse_result_key
from ._result_keys import result_key as result_key
from ._result_keys import result_ordinals as result_ordinals
from ._result_keys import turn_key as turn_key
from ._settings import load_settings as load_settings
from ._tool_policy import ToolPolicy
from ._window import WindowInfo
from .incremental._handover import STATE_KEY as STATE_KEY
from .incremental._handover import Records as Records
from .incremental._handover import checked_records as checked_records
from .incremental._handover import keep_records as keep_records
from .incremental._handover import needed_records as needed_records
from .incremental._handover import read_record as read_record
from .passes._compress import args_key as args_key
from .passes._compress import compress_old_tool_results
from .passes._hygiene import enforce_provider_hygiene
from .passes._images import offload_old_images
from .passes._images import old_images as old_images
from .passes._repair import repair_tool_pairs
from .passes._sanitize import sanitize_messages
from .passes._text import compress_lines, truncate_text
from .passes._thinking import strip_old_thinking
from .passes._trim import Trimmed, trim_history, trim_to_budget
from .passes._truncate import truncate_tool_results
from .tokens._anchor import UsageMissingWarning, count_messages
from .tokens._counters import REPLY_OVERHEAD as REPLY_OVERHEAD
from .tokens._counters import (
    CallableCounter,
    TiktokenCounter,
    TokenCounter,
    TokenizerFallbackWarning,
)
from .tokens._usage import usage_by_category

__all__ = [
    "ARCHIVE_DEFAULTS",
    "MARKER_KEY",
    "BudgetExceededError",
    "CallableCounter",
    "CompactionError",
    "ConfigError",
    "ContextGuard",
    "ContextGuardError",
    "ContextOverflowError",
    "ContextUsage",
    "GuardEvent",
    "GuardPolicy",
    "GuardReport",
    "InvalidInputError",
    "OverflowInfo",
    "PrepareResult",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerFallbackWarning",
    "ToolPolicy",
    "Trimmed",
    "UsageMissingWarning",
    "WindowInfo",
    "WindowTooSmallError",
    "app_message",
    "classify_overflow",
    "compress_lines",
    "compress_old_tool_results",
    "count_messages",
    "enforce_provider_hygiene",
    "is_app_message",
    "is_pinned",
    "offload_old_images",
    "pin",
    "pin_update",
    "reference_prepare",
    "reference_prune",
    "repair_tool_pairs",
    "sanitize_messages",
    "silent_overflow",
    "strip_old_thinking",
    "trim_history",
    "trim_to_budget",
    "truncate_text",
    "truncate_tool_results",
    "unpin",
    "usage_by_category",
]
