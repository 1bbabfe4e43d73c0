"""The specification of ``ContextGuard.prepare``: its passes as plain calls.

Read ``reference_prune`` first: it is what one pruning does, in order, with the
reason for the order. It calls the passes of ``engine.passes`` and nothing of
``engine.incremental`` (``tests/test_layout.py`` checks it), so the equality
test below is not that code tested against itself. ``prepare`` runs the same
passes through the incremental machinery (``_run.Run`` growing the previous
call's steps, ``_stable_prefix`` re-sending the previous prompt, ``_prune``
choosing a depth); whatever it sends is what ``reference_prepare`` gives for the
same history and guard, and ``tests/engine/test_reference.py`` holds the two
equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage

from ._errors import BudgetExceededError
from ._input import to_messages
from ._messages import NONE, first_diff, holds_reply
from ._result_keys import naming, result_ordinals
from ._tool_policy import result_caps
from .passes._bound_thinking import drop_stale_thinking, keep_final_thinking
from .passes._compress import compress_floor, compress_old_tool_results, rules
from .passes._digest import digest_trimmed
from .passes._digest_turns import turns_form
from .passes._hygiene import enforce_provider_hygiene, hygiene_tokens, opens_with_user
from .passes._provider_compaction import drop_before_compaction
from .passes._repair import repair_tool_pairs
from .passes._sanitize import sanitize_messages
from .passes._setting import Setting, digest_fallbacks, digest_room
from .passes._thinking import signed_stays, strip_old_thinking
from .passes._trim import Trimmed, trim_history
from .passes._truncate import truncate_tool_results
from .tokens._counters import REPLY_OVERHEAD

if TYPE_CHECKING:
    from ._guard import ContextGuard


def reference_prune(
    messages: Sequence[BaseMessage], setting: Setting
) -> list[BaseMessage]:
    """One pruning of ``messages`` at ``setting``: the passes, in order, and why.

    1. ``sanitize_messages`` drops empty and malformed messages and invalid tool
       calls: they must go before anything counts them.
    2. ``drop_before_compaction``: a provider compaction block stands for all
       before it, which the provider ignores; from the latest one on is the
       history (with the system messages before it).
    3. ``repair_tool_pairs``, so the passes below see the history's final shape
       (their choices then come out the same when the output is prepared again:
       ``prepare`` is idempotent).
    4. ``truncate_tool_results`` keeps the head and tail of huge tool outputs
       (and of any message over ``max_chars_per_message``); cheap, one message
       at a time.
    5. ``compress_old_tool_results`` shrinks old tool results (the newest stay
       whole), in batches, once the history is over ``compress_trigger`` of the
       budget: before trimming has to drop whole turns.
    6. ``strip_old_thinking``: old reasoning is dead weight once answered
       (with ``bound_thinking`` and no ``stable_prefix``, signed blocks stay:
       stripping them on every call would make the newest one stale).
    7. ``trim_history(history, policy=setting.policy, ...)``, the exported
       ``trim_to_budget`` with what it dropped: drops the oldest whole turns,
       only if the cheaper passes were not enough; it never splits a tool call
       from its results and keeps the system message, the first user message,
       pinned messages with their pairs (``_pins``) and (while
       ``setting.hold``) the calls of ``drop_last`` tools and the assistant
       message the latest user message answers. It weighs each result at its
       compressed size, as step 9 will leave it (read in the history as step 4
       left it), and before it drops an answer it strips the reasoning step 6
       left on the answers it keeps.
    8. The digest (``digest_trimmed``): where turns were trimmed, one marked
       user message notes the tool calls they made, or (``digest_form``
       "turns") the newest of them stay, cut to their calls with one-line
       results (room for it was left by the trim).
    9. ``compress_old_tool_results`` again: its batches count results, so once
       the trim removed some, the count of what is sent decides.
    10. ``repair_tool_pairs`` again: after every removal, no call or result is
        orphaned.
    11. ``drop_stale_thinking`` (with ``bound_thinking``): signed reasoning is
        bound to the prompt that produced it (``setting.produced``: the
        guard's last prompt and the messages added since; else the history as
        read, its tool pairs repaired: it could not have been sent otherwise);
        a block whose prefix differs from it goes, once every edit is known.
    12. ``enforce_provider_hygiene`` last, on the final shape (a user message
        first, no empty tool results, alternating roles).

    Raises:
        BudgetExceededError: what must be kept does not fit ``setting.budget``.
    """
    policy, count = setting.policy, setting.count
    original = list(messages)
    history = sanitize_messages(original)
    history = drop_before_compaction(history)
    history = repair_tool_pairs(history)
    read = history  # a history could only have been sent with its pairs whole
    opened = opens_with_user(history)
    truncated = truncate_tool_results(
        history,
        max_chars=policy.max_tool_result_chars,
        head_chars=policy.truncate_head_chars,
        tail_chars=policy.truncate_tail_chars,
        max_tokens=int(policy.max_tool_result_share * policy.budget(setting.window)),
        token_counter=count,
        max_message_chars=policy.max_chars_per_message,
        dedupe_calls=policy.dedupe_call_text,
        name_source=naming(policy.archived_results, setting.ordinals),
        tool_caps=result_caps(policy),
    )
    history = _compress(truncated, original, setting, opened)
    history = strip_old_thinking(
        history,
        keep_recent=policy.keep_recent_thinking,
        keep_signed=signed_stays(policy),
    )
    kept, trimmed = _trim(history, truncated, original, setting, opened)
    history = _digest(kept, history, trimmed, original, setting)
    history = _compress(history, original, setting, opened)
    history = repair_tool_pairs(history)
    if policy.bound_thinking:
        produced = read if setting.produced is None else setting.produced
        history = drop_stale_thinking(history, produced)
    bound = policy.bound_thinking is True
    return enforce_provider_hygiene(history, removed=opened, bound=bound)


def reference_prepare(
    guard: ContextGuard,
    messages: Any,
    *,
    tools: Sequence[Any] | None = None,
    model: Any = None,
    session_kind: str | None = None,
    persist: bool = False,
) -> list[BaseMessage]:
    """What ``guard.prepare`` sends for ``messages``, by the plain passes.

    The setting is the guard's (window, budget, calibration, tool schemas, and
    the prompt it last sent to this conversation, which signed reasoning is
    held to), as ``prepare`` derives it; the guard is only read. Then the retry
    rule, in one place: a pruning first leaves room for the digest, and when what
    must be kept does not fit with it, prunes again with less (with archived
    results, room for the line of their keys, then none: ``digest_fallbacks``);
    a disabled policy
    sends the history as it is.

    With ``stable_prefix`` (the default), ``prepare`` may instead re-send the
    conversation's previous prompt plus the new messages: that prompt was this
    function's output for the call that made it, and is re-sent only while it
    fits the budget now (also once a reply switched the policy,
    ``interactive_tuning``: the switch waits for the next pruning). A pruning
    then cuts to the cost model's depth below the
    budget (``_cost_model``), not to the budget: ``reference_prepare`` describes the
    ``stable_prefix=False`` policy exactly, and a pruning's depth with
    ``budget`` replaced by that depth. The last try, when the calls of
    ``drop_last`` tools, the newest reply (``keep_reply``; ``persist`` turns
    it on once the interactive settings switch) or the question a reply
    answers do not fit, drops them like the rest. For a model
    that binds signed reasoning, the running tool loop's final turn is sent with
    the blocks it opened with (``keep_final_thinking``).
    """
    setting = guard_setting(
        guard,
        messages,
        tools=tools,
        model=model,
        session_kind=session_kind,
        persist=persist,
    )
    original = to_messages(messages)
    if not guard.policy.enabled:
        return list(original)
    tries = [setting]
    tries += [replace(setting, digest=room) for room in digest_fallbacks(setting)]
    tries.append(replace(tries[-1], hold=False))
    sent = None
    for attempt in tries[:-1]:
        try:
            sent = reference_prune(original, attempt)
            break
        except BudgetExceededError:
            pass
    if sent is None:
        sent = reference_prune(original, tries[-1])
    if setting.policy.bound_thinking:
        sent = keep_final_thinking(sent, original)
    return sent


def guard_setting(
    guard: ContextGuard,
    messages: Any,
    *,
    tools: Sequence[Any] | None = None,
    model: Any = None,
    session_kind: str | None = None,
    persist: bool = False,
) -> Setting:
    """The setting ``guard.prepare`` prunes ``messages`` at (read, not changed)."""
    from .tokens._anchor import scan_history

    original = to_messages(messages)
    replied = holds_reply(original)
    policy = guard.policy_for(model, replied=replied, persist=persist)
    info = guard.window(model)
    budget = guard._budget(info.tokens, model, info.source)
    extra = guard._tool_tokens(tools) + REPLY_OVERHEAD
    _, usage_at, usage_body = scan_history(original, guard.counter.count_message)
    gauge = guard._gauge(original, usage_at, usage_body, extra, model)
    return Setting(
        policy=policy,
        budget=budget,
        window=info.tokens,
        turn_limit=policy.turn_limit(session_kind),
        count=guard.counter.count_message,
        gauge=gauge,
        digest=digest_room(policy, budget),
        produced=guard._produced_prompt(original) if policy.bound_thinking else None,
        ordinals=result_ordinals(original) if policy.archived_results else None,
    )


def _tokens(
    history: Sequence[BaseMessage], original: Sequence[BaseMessage], setting: Setting
) -> int:
    """The guard's figure for ``history``: anchored while its head is the original's."""
    body = sum(map(setting.count, history))
    intact = first_diff(history, original)
    return setting.gauge.tokens(
        body, min(intact, len(history)) if intact != NONE else len(history)
    )


def _compress(
    history: list[BaseMessage],
    original: Sequence[BaseMessage],
    setting: Setting,
    opened: bool,
) -> list[BaseMessage]:
    """``compress_old_tool_results``, once the history is over its trigger.

    As sent (with what hygiene adds), so a prepared output compresses alike.
    """
    policy = setting.policy
    limit = policy.compress_trigger * setting.budget
    now = _tokens(history, original, setting)
    if (
        limit
        and now <= limit
        and now + hygiene_tokens(history, setting.count, opened) <= limit
    ):
        return history
    return compress_old_tool_results(
        history,
        keep_recent=policy.keep_recent_tool_results,
        min_chars=compress_floor(policy, setting.window),
        head_lines=policy.compress_head_lines,
        tail_lines=policy.compress_tail_lines,
        batch=policy.compress_batch,
        name_source=naming(policy.archived_results, setting.ordinals),
        assistant=policy.compress_assistant_text,
        **rules(policy),
    )


def _trim(
    history: list[BaseMessage],
    truncated: list[BaseMessage],
    original: Sequence[BaseMessage],
    setting: Setting,
    opened: bool,
) -> tuple[list[BaseMessage], Trimmed]:
    """``trim_history`` (``trim_to_budget``) at the setting's policy.

    It weighs each message as it reads in ``truncated`` (a result at its
    compressed size for good) and measures a candidate as sent (with what
    hygiene adds), anchored while its head is the original's.
    """
    s, count, gauge = setting, setting.count, setting.gauge

    def measure(candidate: list[BaseMessage]) -> int:
        body = sum(map(count, candidate)) + hygiene_tokens(candidate, count, opened)
        intact = first_diff(candidate, original)
        return gauge.planned(body, min(intact, len(candidate)))

    return trim_history(
        history,
        budget=s.budget,
        token_counter=count,
        policy=s.policy,
        turn_limit=s.turn_limit,
        step=0.0 if s.exact else None,
        extra_tokens=gauge.extra - REPLY_OVERHEAD,  # trim_history adds it back
        scale=gauge.scale,
        margin=gauge.margin,
        window=s.window,
        measure=measure,
        costs_from=truncated,
        digest=s.digest,
        hold=s.hold,
        ordinals=s.ordinals,
    )


def _digest(
    kept: list[BaseMessage],
    history: list[BaseMessage],
    trimmed: Trimmed,
    original: Sequence[BaseMessage],
    setting: Setting,
) -> list[BaseMessage]:
    """The digest of the turns the trim dropped from ``history``, where they were."""
    gauge = setting.gauge
    return digest_trimmed(
        kept,
        history,
        trimmed.gone,
        max_tokens=int(setting.digest / (gauge.scale * (1 + gauge.margin))),
        count=setting.count,
        call_chars=setting.policy.digest_call_chars,
        sources=setting.policy.archived_results,
        originals={m.id: m for m in original if m.id},
        ordinals=setting.ordinals,
        turns=turns_form(setting.policy, setting.window, setting.ordinals),
    )
