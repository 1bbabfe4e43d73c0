"""Forward a ``GuardReport`` to LangChain callbacks and to the log.

Every adapter calls ``emit`` (or ``aemit``) after ``ContextGuard.prepare``. Inside a
run, a child run named ``context_guard`` (tags ``context_guard`` and
``context_guard:<source>``, metadata with the window, its source, the budget and
the token counts; the report as its output) carries each event as a custom event
named ``context_guard.event`` and the report as ``context_guard.report`` (and,
with ``GuardPolicy.report_usage``, the prompt's usage by category as
``context_guard.usage``, counted only when someone listens), so they
read as one step in LangSmith traces and show in ``astream_events`` (as
``on_custom_event``). Outside a run, only the log is written.
Each payload names its ``source``: ``runnable``, ``pre_model_hook``, ``node``,
``middleware`` or ``middleware.before_model``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import (
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
)

from ..engine import ContextGuard, ContextUsage, GuardReport, PrepareResult

logger = logging.getLogger("langchain_context_guard")

RUN_NAME = "context_guard"
"""Name of the traced run that carries a report's custom events."""
REPORT_EVENT = "context_guard.report"
"""Name of the custom event that carries ``GuardReport.to_dict()``."""
EVENT_EVENT = "context_guard.event"
"""Name of the custom event that carries one ``GuardEvent.to_dict()``."""
USAGE_EVENT = "context_guard.usage"
"""Name of the custom event that carries ``ContextUsage.to_dict()`` of the prompt."""

Usage = Callable[[], ContextUsage] | None


def usage_of(guard: ContextGuard, result: PrepareResult) -> Usage:
    """``result.usage`` when the guard's policy reports usage, else None."""
    return result.usage if guard.policy.report_usage else None


def _payloads(
    report: GuardReport, source: str, usage: Usage
) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        (EVENT_EVENT, {"source": source, **event.to_dict()}) for event in report.events
    ]
    out.append((REPORT_EVENT, {"source": source, **report.to_dict()}))
    if usage is not None:
        out.append((USAGE_EVENT, {"source": source, **usage().to_dict()}))
    return out


def _log(report: GuardReport, source: str) -> None:
    """One line per call: INFO when it changed what is sent, DEBUG otherwise."""
    level = logging.INFO if report.changed else logging.DEBUG
    if logger.isEnabledFor(level):
        logger.log(
            level,
            "Context guard (%s): tokens %s -> %s (budget %s, window %s from %s), "
            "%d event(s)",
            source,
            f"{report.tokens_before:,}",
            f"{report.tokens_after:,}",
            f"{report.budget:,}",
            f"{report.context_window:,}",
            report.window_source,
            len(report.events),
        )


def _run_config(report: GuardReport, source: str) -> RunnableConfig:
    """Run name, tags and metadata that make the step readable in a trace."""
    return {
        "run_name": RUN_NAME,
        "tags": [RUN_NAME, f"{RUN_NAME}:{source}"],
        "metadata": {
            "context_guard_source": source,
            "context_window": report.context_window,
            "window_source": report.window_source,
            "budget": report.budget,
            "tokens_before": report.tokens_before,
            "tokens_after": report.tokens_after,
            "changed": report.changed,
            "event_kinds": sorted({e.kind for e in report.events}),
        },
    }


def _child(config: RunnableConfig, report: GuardReport, source: str) -> Any:
    child = {k: v for k, v in config.items() if k != "run_id"}
    return {**child, **_run_config(report, source)}


def emit(
    report: GuardReport,
    *,
    source: str,
    config: RunnableConfig | None = None,
    usage: Usage = None,
) -> None:
    """Log ``report`` and dispatch it (and ``usage()``) as custom events in a run."""
    _log(report, source)
    config = ensure_config(config)
    manager = get_callback_manager_for_config(config)
    if manager.parent_run_id is None or not manager.handlers:
        return  # outside a run, or nobody listening: no run to trace

    def dispatch(data: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        for name, payload in _payloads(report, source, usage):
            dispatch_custom_event(name, payload, config=config)
        return data

    RunnableLambda(dispatch).invoke(report.to_dict(), _child(config, report, source))


async def aemit(
    report: GuardReport,
    *,
    source: str,
    config: RunnableConfig | None = None,
    usage: Usage = None,
) -> None:
    """Async ``emit``: log and dispatch through async callback handlers."""
    _log(report, source)
    config = ensure_config(config)
    manager = get_async_callback_manager_for_config(config)
    if manager.parent_run_id is None or not manager.handlers:
        return

    async def dispatch(data: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        for name, payload in _payloads(report, source, usage):
            await adispatch_custom_event(name, payload, config=config)
        return data

    await RunnableLambda(dispatch).ainvoke(
        report.to_dict(), _child(config, report, source)
    )
