"""Thin adapters that put the engine into each host's idiom.

``GuardRunnable``/``as_runnable`` (an LCEL step), ``pre_model_hook`` and
``guard_node`` (LangGraph), ``guarded_model`` (``create_react_agent``'s model,
pruned inside the agent node), ``ContextGuardMiddleware`` (LangChain v1
``create_agent``; needs the ``agents`` extra and loads on first use),
``guarded_subagents`` and ``guarded_summarization`` (deepagents;
``clear_host_cutoffs`` keeps its summary's cut true when we rewrite the state),
and the callback helpers that forward the guard's events; ``mark_cache_breakpoints``
puts Anthropic prompt-cache breakpoints on the stable prefix; ``_provider_compaction``
asks the provider to compact (``ProviderCompactionWarning`` where it cannot);
``ImageOffloadMiddleware`` sends old images as pointers to their archive;
``make_pin_tools`` lets the model pin messages (``pin_tools=True``).
Imports the engine only.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from ._cache_control import mark_cache_breakpoints
    from ._callbacks import EVENT_EVENT as EVENT_EVENT
    from ._callbacks import USAGE_EVENT as USAGE_EVENT
    from ._callbacks import aemit as aemit
    from ._callbacks import emit as emit
    from ._deepagents import guarded_subagents, guarded_summarization
    from ._host_cutoffs import clear_host_cutoffs as clear_host_cutoffs
    from ._image_archive import make_image_reader
    from ._images import ImageOffloadMiddleware
    from ._langgraph import GuardedAgentState, guard_node, pre_model_hook
    from ._middleware import ContextGuardMiddleware
    from ._model import guarded_model
    from ._namespace import ROOT as ROOT
    from ._namespace import check_prefix as check_prefix
    from ._namespace import configurable as configurable
    from ._namespace import resolve_prefix as resolve_prefix
    from ._namespace import scoped as scoped
    from ._namespace import why_unscoped as why_unscoped
    from ._pins import make_pin_tools
    from ._provider_compaction import ProviderCompactionWarning
    from ._requests import RequestInputs as RequestInputs
    from ._result_search import make_result_search
    from ._results import ResultArchive, make_result_reader, read_result
    from ._runnable import GuardRunnable, as_runnable
    from ._silent import note_silent_overflow as note_silent_overflow
    from ._thinking_binding import (
        drop_stale_thinking_model as drop_stale_thinking_model,
    )

__getattr__ = lazy_getattr(
    __name__,
    {
        "ROOT": "._namespace",
        "check_prefix": "._namespace",
        "configurable": "._namespace",
        "resolve_prefix": "._namespace",
        "scoped": "._namespace",
        "why_unscoped": "._namespace",
        "EVENT_EVENT": "._callbacks",
        "USAGE_EVENT": "._callbacks",
        "RequestInputs": "._requests",
        "clear_host_cutoffs": "._host_cutoffs",
        "aemit": "._callbacks",
        "emit": "._callbacks",
        "note_silent_overflow": "._silent",
        "drop_stale_thinking_model": "._thinking_binding",
        "ProviderCompactionWarning": "._provider_compaction",
        "ContextGuardMiddleware": "._middleware",
        "ImageOffloadMiddleware": "._images",
        "make_image_reader": "._image_archive",
        "GuardedAgentState": "._langgraph",
        "GuardRunnable": "._runnable",
        "as_runnable": "._runnable",
        "ResultArchive": "._results",
        "guard_node": "._langgraph",
        "guarded_model": "._model",
        "guarded_subagents": "._deepagents",
        "guarded_summarization": "._deepagents",
        "make_pin_tools": "._pins",
        "make_result_reader": "._results",
        "make_result_search": "._result_search",
        "mark_cache_breakpoints": "._cache_control",
        "pre_model_hook": "._langgraph",
        "read_result": "._results",
    },
)

__all__ = [
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
    "read_result",
]
