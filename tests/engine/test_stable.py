"""``stable_prefix``: the previous prompt is re-sent unchanged while it fits."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    is_pinned,
    reference_prepare,
)
from langchain_context_guard.engine._messages import is_user, marker
from langchain_context_guard.engine.passes._digest import is_digest
from tests.engine._support import (
    agent_history,
    ai,
    assert_paired,
    call,
    fresh_like,
    result,
    snapshot,
    transcripts,
)

POLICY = GuardPolicy(context_window=32_000, reserve_tokens=4_000)
BUDGET = 28_000


def _grow(guard: ContextGuard, steps: int) -> list[tuple[list[BaseMessage], Any]]:
    """Call the guard before every step of a growing agent run."""
    full = agent_history(steps, result_chars=4_000)
    calls = []
    for k in range(2, len(full) + 1, 2):
        history = full[:k]
        calls.append((history, guard.prepare(history)))
    return calls


def _same_prefix(a: list[BaseMessage], b: list[BaseMessage]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y:
            break
        n += 1
    return n


def test_between_prunings_the_previous_prompt_is_sent_unchanged() -> None:
    calls = _grow(ContextGuard(POLICY), 120)
    prunings = 0
    for (_, before), (history, now) in itertools.pairwise(calls):
        sent = now.messages
        assert now.report.tokens_after <= BUDGET
        assert_paired(sent)
        assert sent[:2] == history[:2]  # system prompt and task
        assert sent[-1] is history[-1]
        kept = _same_prefix(before.messages, sent)
        if kept == len(before.messages):  # appended: only the new step is new
            assert sent[kept:] == history[len(history) - (len(sent) - kept) :]
            assert now.report.reused == kept
        else:
            prunings += 1
            assert now.report.reused == kept < len(before.messages)
            # pruned afresh: compression alone, or trimming too
            assert {"compress", "trim"} & {e.kind for e in now.report.events}
    assert 3 <= prunings <= 12  # 120 steps of ~1k tokens in a 28k budget


def test_a_pruning_leaves_room_to_grow() -> None:
    calls = _grow(ContextGuard(POLICY), 120)
    after = [
        now.report.tokens_after
        for _, now in calls
        if {"compress", "trim"} & {e.kind for e in now.report.events}
    ]
    assert after
    share = POLICY.prune_to + POLICY.digest_share
    assert all(t <= share * BUDGET for t in after)
    assert all(t >= 0.2 * BUDGET for t in after)


def test_reuse_is_reported_and_the_caller_list_is_untouched() -> None:
    guard = ContextGuard(POLICY)
    full = agent_history(80, result_chars=4_000)
    first = guard.prepare(full[:-2])
    before = snapshot(full)
    second = guard.prepare(full)
    assert snapshot(full) == before
    kinds = [e.kind for e in second.report.events]
    assert kinds == ["reuse"]
    assert second.report.changed
    assert second.messages == [*first.messages, *full[-2:]]
    assert second.report.reused == len(first.messages)


def test_the_stored_output_extends_as_well() -> None:
    """Persist modes store what was sent; the next history grows that."""
    guard = ContextGuard(POLICY)
    full = agent_history(80, result_chars=4_000)
    sent = guard.prepare(full[:-2]).messages
    again = guard.prepare([*sent, *full[-2:]])
    assert again.messages == [*sent, *full[-2:]]
    assert again.report.reused == len(sent)


def test_a_stored_output_that_rewrote_the_first_answer_extends_as_well() -> None:
    """With no system prompt, a pruning can cut the history's second message.

    The stored output then starts otherwise than the history it came from; it
    is still that conversation: while it fits, the next call re-sends it.
    """
    guard = ContextGuard(GuardPolicy(context_window=16_000))
    full = agent_history(80, result_chars=4_000)[1:]  # no system prompt
    state: list[BaseMessage] = []
    rewritten = 0
    for k in range(3, len(full) + 1, 2):  # each call after a tool's result
        given = [*state, *full[k - 2 : k]] if state else full[:k]
        out = guard.prepare(given, persist=True)
        report = out.report
        if state and report.reused < len(state):
            # A stored output that fits is re-sent, never pruned afresh (it was
            # at 70% of the budget, once the second message was rewritten).
            assert report.tokens_before > 0.9 * report.budget, k
        rewritten += out.messages[1] is not given[1]
        state = out.messages
    assert rewritten  # the first answer was cut down at some pruning


def test_new_messages_still_go_through_the_per_message_passes() -> None:
    guard = ContextGuard(POLICY)
    full = agent_history(80, result_chars=4_000)
    sent = guard.prepare(full).messages
    huge = result("c-big", "x" * 200_000, id="big")
    history = [*full, ai(call("c-big"), id="a-big"), huge]
    out = guard.prepare(history)
    assert out.messages[: len(sent)] == sent
    assert len(out.messages[-1].text) < 10_000
    assert [e.kind for e in out.report.events] == ["truncate", "reuse"]


def test_what_does_not_continue_cleanly_is_pruned_afresh() -> None:
    guard = ContextGuard(POLICY)
    full = agent_history(80, result_chars=4_000)
    guard.prepare(full)
    edited = [*full[:-1], result("c79", "changed", id="t79")]  # an edited message
    assert guard.prepare(edited).report.reused < len(edited)
    dangling = [*full, ai(call("late"), id="a-late")]  # an unanswered call
    out = guard.prepare(dangling)
    assert_paired(out.messages)
    assert not any(e.kind == "reuse" for e in out.report.events)
    system = [*full, SystemMessage("New rules.", id="sys2")]
    assert not any(e.kind == "reuse" for e in guard.prepare(system).report.events)


def test_conversations_sharing_a_guard_keep_their_own_prompts() -> None:
    guard = ContextGuard(POLICY)
    one = agent_history(80, result_chars=4_000, task="Task one.")
    two = agent_history(80, result_chars=4_000, task="Task two.")
    two[0] = one[0]  # the same system prompt object, as a shared agent has
    a = guard.prepare(one[:-2]).messages
    b = guard.prepare(two[:-2]).messages
    assert guard.prepare(one).messages == [*a, *one[-2:]]
    assert guard.prepare(two).messages == [*b, *two[-2:]]


def test_order_free_mode_fits_every_call_to_the_budget() -> None:
    """``stable_prefix=False``: the same history always gives the same prompt."""
    policy = POLICY.model_copy(update={"stable_prefix": False})
    warm = ContextGuard(policy)
    full = agent_history(120, result_chars=4_000)
    for k in range(100, len(full) + 1, 2):
        out = warm.prepare(full[:k])
        assert out.messages == ContextGuard(policy).prepare(full[:k]).messages
        assert out.report.tokens_after <= BUDGET
        assert not any(e.kind == "reuse" for e in out.report.events)


def test_the_digest_is_where_the_trimmed_turns_were() -> None:
    history = agent_history(120, result_chars=4_000)
    policy = POLICY.model_copy(update={"digest": True, "prune_to": 0.3})
    out = ContextGuard(policy).prepare(history)
    digests = [i for i, m in enumerate(out.messages) if is_digest(m)]
    assert digests == [2]  # after the system prompt and the task
    note = out.messages[2]
    assert isinstance(note, HumanMessage)
    kept = {m.id for m in out.messages}
    dropped = [m for m in history if m.id not in kept]
    assert dropped and dropped[0].id == "a0"
    assert "bash: cat f0.py" in note.text  # the oldest dropped step's call
    first_kept = out.messages[3]
    assert first_kept.id not in {m.id for m in dropped}
    assert f"bash: cat f{first_kept.id[1:]}.py" not in note.text


def _policy(digest: dict[str, Any], **knobs: Any) -> GuardPolicy:
    return GuardPolicy(**digest, **knobs)


STABLE_POLICIES = st.builds(
    _policy,
    st.sampled_from(
        [
            {},
            {"digest": True},
            {"digest": True, "digest_form": "turns"},
            {"interactive_tuning": True},
        ]
    ),
    context_window=st.sampled_from([16_000, 20_000, 40_000]),
    reserve_tokens=st.sampled_from([1_000, 4_000]),
    keep_recent_tool_results=st.sampled_from([0, 3]),
    prune_to=st.sampled_from([0.2, 0.3, 0.6]),
    digest_share=st.sampled_from([0.0, 0.15]),
    hard_min_tokens=st.just(0),
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(transcripts(usage=True), STABLE_POLICIES)
def test_every_call_of_a_growing_history_is_valid(history, policy) -> None:
    """Kept or pruned afresh, each prompt fits, pairs and keeps what it must."""
    guard = ContextGuard(policy)
    previous: list[BaseMessage] | None = None
    for n in range(1, len(history) + 1):
        prefix = history[:n]
        before = snapshot(prefix)
        try:
            out = guard.prepare(prefix)
        except BudgetExceededError:
            previous = None
            continue
        assert snapshot(prefix) == before
        sent, report = out.messages, out.report
        assert report.tokens_after <= report.budget
        assert_paired(sent)
        kinds = [e.kind for e in report.events]
        if "reuse" in kinds and previous is not None:
            # error results closing calls still open are sent, not kept: the
            # real results take their place
            while previous and (marker(previous[-1]) or {}).get("kind") == (
                "synthetic_result"
            ):
                previous = previous[:-1]
            keep = len(previous)
            if previous and sent[keep - 1] != previous[-1]:
                # a new assistant message was joined to the last one sent
                keep -= 1
                mark = marker(sent[keep]) or {}
                assert mark.get("kind") == "merged"
                assert previous[-1].id in mark["ids"]
            assert sent[:keep] == previous[:keep]
            assert report.reused == keep
        if isinstance(prefix[0], SystemMessage):
            assert sent[0] == prefix[0]
        previous = sent


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(transcripts(usage=True, pins=True), STABLE_POLICIES)
def test_a_re_sent_prompt_keeps_every_pin_a_pruning_keeps(history, policy) -> None:
    """Pinned messages are in every prompt, re-sent or pruned afresh.

    Hygiene may join a pinned assistant message to the one before it (roles
    alternate): the joined message names it among its parts. A pinned result
    found before its call (a misplaced one) is left out: a re-sent prompt sent
    it as an orphan before the call came, and answers the call as a fresh
    pruning of a broken history does not.
    """
    guard = ContextGuard(policy)
    for n in range(1, len(history) + 1):
        prefix = history[:n]
        try:
            sent = guard.prepare(prefix).messages
            pruned = reference_prepare(fresh_like(guard), prefix)
        except BudgetExceededError:
            continue
        early = _results_before_their_calls(prefix)
        pinned = {m.id for m in pruned if is_pinned(m) and m.id not in early}
        kept = {m.id for m in sent if is_pinned(m)}
        kept |= {i for m in sent for i in (marker(m) or {}).get("ids", ())}
        assert pinned <= kept


def _results_before_their_calls(history: list) -> set[str]:
    """Ids of the tool results that come before the call they answer."""
    seen: set[str] = set()
    early: set[str] = set()
    for m in history:
        if isinstance(m, AIMessage):
            seen.update(c["id"] for c in m.tool_calls)
        elif isinstance(m, ToolMessage) and m.tool_call_id not in seen and m.id:
            early.add(m.id)
    return early


def test_a_history_grown_message_by_message_keeps_its_prefix() -> None:
    """A call whose last step has no result yet gets an error result for it, sent
    but not kept: when the real result comes, the prompt goes on from before."""
    guard = ContextGuard(POLICY)
    full = agent_history(120, result_chars=4_000)
    previous: list[BaseMessage] = []
    fresh = 0
    for n in range(3, len(full) + 1):
        out = guard.prepare(full[:n])
        sent = out.messages
        assert_paired(sent)
        assert out.report.tokens_after <= BUDGET
        if n % 2 == 1:  # ends with an assistant message whose call is open
            closing = sent[-1]
            assert (marker(closing) or {}).get("kind") == "synthetic_result"
        kept = previous[:-1] if n % 2 == 0 else previous  # less the error result
        if out.report.reused >= len(kept):
            assert sent[: len(kept)] == kept
        else:
            fresh += 1
        previous = sent
    assert fresh <= 12  # prunings only, not one per open call


def test_a_turn_limit_holds_between_prunings() -> None:
    """``history_limit`` (seed 004) is kept on every call, not only at prunings."""
    guard = ContextGuard(POLICY.model_copy(update={"history_limit": 3}))
    history: list[BaseMessage] = [SystemMessage("Be brief.", id="sys")]
    for t in range(12):
        history += [
            HumanMessage(f"question {t}", id=f"u{t}"),
            ai(call(f"q{t}"), id=f"a{t}"),
            result(f"q{t}", f"answer {t}", id=f"t{t}"),
        ]
        sent = guard.prepare(history).messages
        users = [m.id for m in sent if is_user(m)]
        assert users[-1] == f"u{t}"
        assert len(users) <= 3 + 1  # the last 3 turns, and the first (the task)


def test_the_same_history_twice_gets_the_same_prompt() -> None:
    """A retried call (same history, even one ending with an open call) is
    answered with the very prompt sent before."""
    guard = ContextGuard(POLICY)
    full = agent_history(80, result_chars=4_000)
    for history in (full, [*full, ai(call("late"), id="a-late")]):
        first = guard.prepare(history)
        again = guard.prepare(history)
        assert again.messages == first.messages
        assert again.report.reused >= len(first.messages) - 1


def test_a_reused_call_id_is_appended_renamed_and_the_prefix_kept():
    """A step that reuses an earlier call id (a server that numbers calls per
    turn) is sent renamed behind the previous prompt, which stays as it was."""
    guard = ContextGuard(POLICY)
    history = [
        *agent_history(4),
        ai(call("c0"), id="again"),
        result("c0", id="t-again"),
    ]
    previous = guard.prepare(history[:-2]).messages
    sent = guard.prepare(history).messages
    assert sent[: len(previous)] == previous  # the cache keeps hitting
    calls = [c["id"] for m in sent if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == ["c0", "c1", "c2", "c3", "c0-2"]
    assert sent[-1].tool_call_id == "c0-2" and sent[-1].id == "t-again"
    assert sent == reference_prepare(guard, history)
