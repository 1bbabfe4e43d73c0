"""The recovery chain's steps: take in a refusal, compact, truncate, give up.

``begin`` measures what was refused, learns the stated limit and emits the
``overflow`` event; ``after_compaction`` checks and fits a compactor's result;
``truncate`` fits the history to the learned (or guessed) limit. A step that
does not shrink the history gives None (compact) or ends the chain with
``ContextOverflowError`` and the figures (truncate).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn

from langchain_core.messages import BaseMessage

from ..engine import (
    CompactionError,
    ContextGuard,
    ContextGuardError,
    GuardEvent,
    OverflowInfo,
    diff_event,
    log_event,
    scaled_limit,
    to_messages,
)
from ..engine import ContextOverflowError as GuardOverflowError
from ._state import EventSink, Recovery, RecoveryState, Step

__all__ = [
    "TRUNCATE_SHARE",
    "UNKNOWN_LIMIT_SHRINK",
    "Failure",
    "after_compaction",
    "begin",
    "truncate",
]

UNKNOWN_LIMIT_SHRINK = 0.75
"""Without a stated limit, the truncate step aims at this share of what was refused."""
TRUNCATE_SHARE = 0.25
"""The truncate step's cap on one tool result, as a share of the budget."""


@dataclass(frozen=True)
class Failure:
    """One refused request: what was sent, its size and the limit learned."""

    messages: list[BaseMessage]
    info: OverflowInfo
    tokens: int
    window: int
    limit: int | None
    tools: Sequence[Any] | None
    budget: int = 0
    """What the retry may send: ``guard.budget`` of the model at ``window``."""


def begin(
    messages: Sequence[Any],
    info: OverflowInfo,
    guard: ContextGuard,
    state: RecoveryState,
    model: Any,
    tools: Sequence[Any] | None,
    sink: EventSink | None,
) -> Failure:
    """Measure the refused request, learn its limit, emit ``overflow``."""
    msgs = to_messages(messages)
    tokens = guard.count_tokens(msgs, tools=tools)
    limit = scaled_limit(info, tokens)
    ignored = None
    if limit is not None:
        ignored = guard.learn_limit(model, limit, stated=info.limit_tokens)
    if ignored is not None:  # an implausible figure: as if none were stated
        limit = None
    stated = f"{info.limit_tokens:,}" if info.limit_tokens else "not stated"
    detail = (
        f"{info.provider_hint or 'provider'} refused "
        f"{info.requested_tokens or tokens:,} tokens (limit {stated}); "
        f"attempt {state.attempts + 1}"
    )
    if info.provider_hint == "silent":  # answered, but past the window
        detail = (
            f"silent overflow: the reply reports {info.requested_tokens or 0:,} "
            f"input tokens, over the {stated}-token window; attempt "
            f"{state.attempts + 1}"
        )
    failure = Failure(msgs, info, tokens, 0, limit, tools)
    try:
        window = guard.window(model).tokens
        window = min(window, limit) if limit else window
        # The same budget the middleware counts: the model's max_tokens reserve.
        budget = guard.budget(model, window=window)
    except ContextGuardError as exc:
        _emit(sink, GuardEvent("overflow", tokens_before=tokens, detail=detail))
        _give_up(failure, guard, state, sink, _reason(exc), exc)
    _emit(
        sink,
        GuardEvent(
            "overflow",
            tokens_before=tokens,
            tokens_after=tokens,
            budget=budget,
            detail=detail,
        ),
    )
    if ignored is not None and sink is not None:  # learn_limit logged it
        sink(ignored)
    return replace(failure, window=window, budget=budget)


def after_compaction(
    failure: Failure,
    compacted: Any,
    guard: ContextGuard,
    state: RecoveryState,
    sink: EventSink | None,
) -> Recovery | None:
    """The compacted history fitted to the window, or None if it cannot help."""
    step = f"compact {state.compactions + 1}"
    if isinstance(compacted, CompactionError):
        _emit(sink, _note(failure, f"{step} failed ({compacted.reason})"))
        return None
    compacted = to_messages(getattr(compacted, "messages", compacted))
    if guard.count_tokens(compacted, tools=failure.tools) >= failure.tokens:
        _emit(sink, _note(failure, f"{step} did not shrink the history"))
        return None
    share = guard.policy.max_tool_result_share
    try:
        fitted = _fit(guard, compacted, failure, failure.budget, share)
    except ContextGuardError as exc:
        _emit(sink, _note(failure, f"{step}: result does not fit ({_reason(exc)})"))
        return None
    return _step(failure, fitted, guard, state, "compact", step, sink)


def truncate(
    failure: Failure, guard: ContextGuard, state: RecoveryState, sink: EventSink | None
) -> Recovery:
    """Cut tool results and fit the history to the limit, once."""
    if state.truncated:
        _give_up(failure, guard, state, sink, "every step has been tried")
    policy = guard.policy
    budget = failure.budget
    if failure.limit is None:
        budget = min(budget, int(failure.tokens * UNKNOWN_LIMIT_SHRINK))
    if budget <= 0:
        _give_up(failure, guard, state, sink, "the limit leaves no room after reserve")
    share = min(policy.max_tool_result_share, TRUNCATE_SHARE)
    try:
        fitted = _fit(guard, failure.messages, failure, budget, share)
    except ContextGuardError as exc:
        _give_up(failure, guard, state, sink, _reason(exc), exc)
    done = _step(failure, fitted, guard, state, "truncate", "truncate", sink)
    if done is None:
        _give_up(failure, guard, state, sink, "nothing left to truncate or trim")
    return done


def _fit(
    guard: ContextGuard,
    messages: Any,
    failure: Failure,
    budget: int,
    share: float,
) -> list[BaseMessage]:
    """``prepare`` with the guard's policy fitted to a budget of ``budget`` tokens."""
    reserve = guard.policy.reserve_tokens
    policy = guard.policy.model_copy(
        update={
            "enabled": True,
            "context_window": budget + reserve,
            "reserve_tokens": reserve,  # set: no model max_tokens to look at
            "hard_min_tokens": 0,
            "warn_below_tokens": 0,
            "max_tool_result_share": share,
            "stable_prefix": False,  # fit this one call as closely as possible
        }
    )
    tight = ContextGuard(policy, token_counter=guard.counter)
    return tight.prepare(messages, tools=failure.tools).messages


def _step(
    failure: Failure,
    fitted: list[BaseMessage],
    guard: ContextGuard,
    state: RecoveryState,
    kind: Step,
    label: str,
    sink: EventSink | None,
) -> Recovery | None:
    """A ``Recovery`` for ``fitted``, or None if it is not smaller."""
    after = guard.count_tokens(fitted, tools=failure.tools)
    if after >= failure.tokens:
        _emit(sink, _note(failure, f"{label} did not shrink the history"))
        return None
    event = diff_event(
        "overflow_recovery",
        failure.messages,
        fitted,
        lambda m: guard.count_tokens(m, tools=failure.tools),
        failure.budget,
    )
    event = replace(event, detail=f"{label}: retrying with {after:,} tokens")
    _emit(sink, event)
    compacted = kind == "compact"
    new = replace(
        state,
        attempts=state.attempts + 1,
        compactions=state.compactions + compacted,
        truncated=state.truncated or not compacted,
    )
    return Recovery(fitted, new, kind, (event,))


def _note(failure: Failure, detail: str) -> GuardEvent:
    return GuardEvent("overflow_recovery", tokens_before=failure.tokens, detail=detail)


def _give_up(
    failure: Failure,
    guard: ContextGuard,
    state: RecoveryState,
    sink: EventSink | None,
    reason: str,
    cause: BaseException | None = None,
) -> NoReturn:
    """Emit the final event and raise ``ContextOverflowError``."""
    _emit(sink, _note(failure, f"stopped: {reason}"))
    info = failure.info
    tokens = info.requested_tokens or failure.tokens
    limit = info.limit_tokens or failure.limit
    shown = f"{limit:,}" if limit else "not stated"
    error = GuardOverflowError(
        f"The model refused the context ({tokens:,} tokens, limit {shown}) and "
        f"recovery stopped after {state.attempts} attempt(s): {reason}.",
        tokens=tokens,
        limit=limit,
        attempts=state.attempts,
    )
    if cause is not None:
        raise error from cause
    raise error


def _reason(error: ContextGuardError) -> str:
    """The error's message without its own "Fix:" hint."""
    return str(error).split(" Fix: ")[0].rstrip(".")


def _emit(sink: EventSink | None, event: GuardEvent) -> None:
    log_event(event)
    if sink is not None:
        sink(event)
