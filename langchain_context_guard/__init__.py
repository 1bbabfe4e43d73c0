"""Keep a LangChain/LangGraph agent's message history inside its context window.

The layout draws the architecture; dependencies point down to the engine:

- ``engine``: policy, token counting, the passes, ``ContextGuard`` (langchain-core);
- ``adapters``: LCEL runnable, LangGraph hook and node, ``create_agent`` middleware;
- ``compaction``: the LLM summary in fixed sections, its graph branch and middleware;
- ``recovery``: the overflow recovery chain around a model;
- ``replay``: transcripts, the replay benchmark and its metrics;
- ``cli``: the ``context-guard`` command.

Every name loads on first use (the engine's too, so ``context-guard --help``
starts at once): ``import langchain_context_guard`` pulls in neither ``langchain``
(the ``agents`` extra), nor LangGraph's graph runtime, nor plotting or
checkpointer packages.
"""

import logging
from typing import TYPE_CHECKING

from ._lazy import lazy_getattr

if TYPE_CHECKING:
    from .adapters import (
        ContextGuardMiddleware,
        GuardedAgentState,
        GuardRunnable,
        ImageOffloadMiddleware,
        ProviderCompactionWarning,
        ResultArchive,
        as_runnable,
        guard_node,
        guarded_model,
        guarded_subagents,
        guarded_summarization,
        make_image_reader,
        make_pin_tools,
        make_result_reader,
        make_result_search,
        mark_cache_breakpoints,
        pre_model_hook,
    )
    from .compaction import (
        CompactionMiddleware,
        CompactionSettings,
        Compactor,
        SerializedSummaryWarning,
        acompact_messages,
        add_compaction,
        compact_messages,
        make_compaction_tool,
        make_recall_tool,
    )
    from .engine import (
        MARKER_KEY,
        BudgetExceededError,
        CallableCounter,
        CompactionError,
        ConfigError,
        ContextGuard,
        ContextGuardError,
        ContextOverflowError,
        ContextUsage,
        GuardEvent,
        GuardPolicy,
        GuardReport,
        InvalidInputError,
        OverflowInfo,
        PrepareResult,
        TiktokenCounter,
        TokenCounter,
        TokenizerFallbackWarning,
        ToolPolicy,
        UsageMissingWarning,
        WindowInfo,
        WindowTooSmallError,
        classify_overflow,
        compress_lines,
        compress_old_tool_results,
        count_messages,
        enforce_provider_hygiene,
        is_pinned,
        offload_old_images,
        pin,
        pin_update,
        reference_prepare,
        repair_tool_pairs,
        sanitize_messages,
        silent_overflow,
        strip_old_thinking,
        trim_history,
        trim_to_budget,
        truncate_text,
        truncate_tool_results,
        unpin,
    )
    from .recovery import (
        OverflowRecoveryMiddleware,
        OverflowRecoveryRunnable,
        with_overflow_recovery,
    )

logging.getLogger(__name__).addHandler(logging.NullHandler())

_LAZY = {
    **dict.fromkeys(
        (
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
            "UsageMissingWarning",
            "WindowInfo",
            "WindowTooSmallError",
            "classify_overflow",
            "compress_lines",
            "compress_old_tool_results",
            "count_messages",
            "enforce_provider_hygiene",
            "is_pinned",
            "offload_old_images",
            "pin",
            "pin_update",
            "reference_prepare",
            "reference_prepare",
            "repair_tool_pairs",
            "sanitize_messages",
            "silent_overflow",
            "strip_old_thinking",
            "trim_history",
            "trim_to_budget",
            "truncate_text",
            "truncate_tool_results",
            "unpin",
        ),
        ".engine",
    ),
    **dict.fromkeys(
        (
            "ContextGuardMiddleware",
            "GuardRunnable",
            "GuardedAgentState",
            "ImageOffloadMiddleware",
            "ProviderCompactionWarning",
            "ResultArchive",
            "as_runnable",
            "guard_node",
            "guarded_model",
            "guarded_subagents",
            "guarded_summarization",
            "make_image_reader",
            "make_pin_tools",
            "make_result_reader",
            "make_result_search",
            "mark_cache_breakpoints",
            "pre_model_hook",
        ),
        ".adapters",
    ),
    **dict.fromkeys(
        (
            "CompactionMiddleware",
            "CompactionSettings",
            "Compactor",
            "SerializedSummaryWarning",
            "acompact_messages",
            "add_compaction",
            "compact_messages",
            "make_compaction_tool",
            "make_recall_tool",
        ),
        ".compaction",
    ),
    **dict.fromkeys(
        (
            "OverflowRecoveryMiddleware",
            "OverflowRecoveryRunnable",
            "with_overflow_recovery",
        ),
        ".recovery",
    ),
}

__getattr__ = lazy_getattr(__name__, _LAZY)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
    "ContextUsage",
    "GuardEvent",
    "GuardPolicy",
    "GuardReport",
    "GuardRunnable",
    "GuardedAgentState",
    "ImageOffloadMiddleware",
    "InvalidInputError",
    "OverflowInfo",
    "OverflowRecoveryMiddleware",
    "OverflowRecoveryRunnable",
    "PrepareResult",
    "ProviderCompactionWarning",
    "ResultArchive",
    "SerializedSummaryWarning",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerFallbackWarning",
    "ToolPolicy",
    "UsageMissingWarning",
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
    "guarded_model",
    "guarded_subagents",
    "guarded_summarization",
    "is_pinned",
    "make_compaction_tool",
    "make_image_reader",
    "make_pin_tools",
    "make_recall_tool",
    "make_result_reader",
    "make_result_search",
    "mark_cache_breakpoints",
    "offload_old_images",
    "pin",
    "pin_update",
    "pre_model_hook",
    "reference_prepare",
    "repair_tool_pairs",
    "sanitize_messages",
    "silent_overflow",
    "strip_old_thinking",
    "trim_history",
    "trim_to_budget",
    "truncate_text",
    "truncate_tool_results",
    "unpin",
    "with_overflow_recovery",
]
