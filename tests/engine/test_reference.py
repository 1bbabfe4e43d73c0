"""``prepare`` sends what the reference pipeline (the plain passes) gives.

``engine._reference.reference_prepare`` calls the exported passes in order; it is
the specification. ``ContextGuard.prepare`` reaches the same output through the
incremental machinery (steps grown from the previous call, per-message memos,
the forgotten head, batch counting). These tests hold the two equal, call by
call, on generated histories, the shared transcripts, growing histories with and
without usage, histories rebuilt from a checkpoint (equal copies, new objects),
reasoning and images; and state the one place they deliberately part: the
stable prefix re-sends an earlier prompt while it fits.

``CONTEXT_GUARD_REFERENCE_EXAMPLES`` raises the generated example count (CI runs
a smaller one).
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from langchain_context_guard import (
    BudgetExceededError,
    ContextGuard,
    GuardPolicy,
    TiktokenCounter,
    unpin,
)
from langchain_context_guard.engine import reference_prepare
from langchain_context_guard.replay import load_trajectories, shared_trajectory_dir
from tests.engine._support import (
    POLICY_KNOBS,
    agent_history,
    fresh_like,
    live_usage,
    snapshot,
    transcripts,
)

EXAMPLES = int(os.environ.get("CONTEXT_GUARD_REFERENCE_EXAMPLES", "40"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
DIGESTS = st.sampled_from(
    [{"digest": False}, {"digest": True}, {"digest": True, "digest_form": "turns"}]
)
"""No digest, the note, the turns themselves (``digest_form`` needs ``digest``)."""


def _policy(digest: dict[str, Any], archive: bool, **knobs: Any) -> GuardPolicy:
    policy = GuardPolicy(**digest, **knobs)
    return policy.with_archive() if archive else policy


POLICIES = st.builds(
    _policy,
    DIGESTS,
    st.booleans(),  # as an adapter with a ResultArchive runs it
    **POLICY_KNOBS,
    compress_assistant_text=st.booleans(),
    compress_call_args=st.booleans(),
    archived_results=st.booleans(),
    max_chars_per_message=st.sampled_from([None, 3_000]),
    keep_reply=st.booleans(),
)
COUNTER = TiktokenCounter()


def _outcome(send: Any) -> Any:
    try:
        return snapshot(send())
    except BudgetExceededError as err:
        return ("error", err.tokens, err.budget)


def assert_reference(guard: ContextGuard, history: list[BaseMessage]) -> None:
    """``guard.prepare(history)`` sends exactly what the reference gives."""
    reference = fresh_like(guard)
    expected = _outcome(lambda: reference_prepare(reference, history))
    assert _outcome(lambda: guard.prepare(history).messages) == expected


@SETTINGS
@given(transcripts(usage=True, names=True), POLICIES, st.data())
def test_prepare_is_the_reference_on_generated_growing_histories(history, policy, data):
    start = data.draw(st.integers(1, len(history)))
    ends = sorted({start, *data.draw(st.lists(st.integers(start, len(history))))})
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in ends:
        assert_reference(guard, history[:n])


@SETTINGS
@given(transcripts(usage=True, names=True, pins=True), POLICIES, st.data())
def test_prepare_is_the_reference_on_generated_histories_with_pins(
    history, policy, data
):
    start = data.draw(st.integers(1, len(history)))
    ends = sorted({start, *data.draw(st.lists(st.integers(start, len(history))))})
    released = [unpin(m) for m in history]
    guard = ContextGuard(policy, token_counter=COUNTER)
    for k, n in enumerate(ends):  # pins come and go between calls
        assert_reference(guard, (history if k % 2 else released)[:n])


@SETTINGS
@given(transcripts(names=True), POLICIES)
def test_prepare_is_the_reference_on_histories_rebuilt_from_a_checkpoint(
    history, policy
):
    guard = ContextGuard(policy, token_counter=COUNTER)
    for n in (len(history) // 2, len(history)):
        rebuilt = copy.deepcopy(history[:n])  # equal values, new objects
        assert_reference(guard, rebuilt)


@pytest.mark.parametrize("ratios", [[1.0], [1.15], [1.05, 1.3, 1.0]])
def test_prepare_is_the_reference_for_an_agent_with_live_usage(ratios):
    policy = GuardPolicy(stable_prefix=False, context_window=16_000)
    guard = ContextGuard(policy, token_counter=COUNTER)
    live_usage(agent_history(60), guard, ratios, assert_reference)


def _trajectories() -> list[list[BaseMessage]]:
    folder = shared_trajectory_dir()
    if folder is None:
        return []
    found = load_trajectories(folder)
    return [found[name] for name in sorted(found)[::6]]


@pytest.mark.parametrize(
    ("window", "digest"),
    [
        (16_000, {}),
        (32_000, {}),
        (16_000, {"digest": True, "digest_form": "turns"}),
        (16_000, {"digest": True, "digest_form": "turns", "archived_results": True}),
    ],
)
def test_prepare_is_the_reference_on_the_shared_transcripts(window, digest):
    histories = _trajectories()
    if not histories:
        pytest.skip("the shared transcripts are not here")
    policy = GuardPolicy(context_window=window, stable_prefix=False, **digest)
    for history in histories:
        guard = ContextGuard(policy, token_counter=COUNTER)
        for n in range(2, len(history) + 1, 3):
            assert_reference(guard, history[:n])


def test_a_stable_prefix_re_sends_a_reference_output_within_the_budget_now():
    """The one deliberate difference: between prunings, the previous prompt.

    Each call either prunes (the passes run anew, to the cost model's depth) or
    re-sends the conversation's previous output followed by the new messages,
    byte for byte, and only while that fits the budget now.
    """
    policy = GuardPolicy(context_window=16_000)
    guard = ContextGuard(policy, token_counter=COUNTER)
    history = agent_history(60)
    previous: list[BaseMessage] | None = None
    reused = 0
    for n in range(2, len(history) + 1):
        result = guard.prepare(history[:n])
        sent, report = result.messages, result.report
        assert report.tokens_after <= report.budget
        if previous is not None and sent[: len(previous)] == previous:
            reused += 1
            assert report.reused >= len(previous)
        previous = sent
    assert reused > (len(history) - 2) // 3  # most calls keep the cache


@pytest.mark.parametrize("window", [16_000, 24_000])
def test_prepare_is_the_reference_with_results_kept_whole(window):
    from langchain_context_guard.engine._messages import kept_whole, with_marker

    history = [
        with_marker(m, "kept_whole")
        if m.type == "tool" and int(m.id[1:]) % 3 == 0
        else m
        for m in agent_history(40, result_chars=6_000)
    ]
    guard = ContextGuard(
        GuardPolicy(context_window=window, reserve_tokens=2_000, stable_prefix=False),
        token_counter=COUNTER,
    )
    for n in range(10, len(history) + 1, 7):
        assert_reference(guard, history[:n])
    sent = guard.prepare(history).messages
    kept = {m.id for m in history if kept_whole(m)}
    whole = [m for m in sent if m.id in kept]
    assert len(whole) > 3 and all(m in history for m in whole)  # sent as given
    assert any(
        m.type == "tool" and not kept_whole(m) and m not in history for m in sent
    )


NOT_STEPS = {
    "compress_lines": "cuts text for the compression pass",
    "offload_old_images": "ImageOffloadMiddleware's pass, not a step of prepare",
    "trim_to_budget": "the messages of trim_history, which the reference calls",
    "truncate_text": "cuts text for the truncation pass",
}


def test_the_reference_calls_every_exported_pass():
    """Each pass the package exports is a step of ``reference_prune`` (bar helpers).

    So the equality tests above hold ``prepare`` to the very functions a caller
    gets, ``trim_to_budget`` included (through ``trim_history``).
    """
    import ast
    import inspect

    import langchain_context_guard
    from langchain_context_guard.engine import _reference

    def module(name: str) -> str:
        return getattr(getattr(langchain_context_guard, name), "__module__", "")

    passes = "langchain_context_guard.engine.passes."
    exported = {
        n for n in langchain_context_guard.__all__ if module(n).startswith(passes)
    }
    tree = ast.parse(inspect.getsource(_reference))
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert "trim_history" in exported
    assert exported - called == set(NOT_STEPS)
