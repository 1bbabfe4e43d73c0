"""The guard's output for the shared transcripts, judged by the providers' builders.

Every call of every shared transcript is prepared at 16k and 32k (the guard
keeps state between calls, so none is skipped); the payloads are built and
checked for every ``EVERY``-th call (all of them with
``CONTEXT_GUARD_ALL_PAYLOADS=1``: about two minutes).
"""

from __future__ import annotations

import os

import pytest
from langchain_core.messages import AIMessage

from langchain_context_guard import BudgetExceededError, ContextGuard, GuardPolicy
from langchain_context_guard.replay import (
    default_reserve,
    load_trajectories,
    shared_trajectory_dir,
)
from tests.providers._support import PROVIDERS

EVERY = 1 if os.environ.get("CONTEXT_GUARD_ALL_PAYLOADS") else 8
SHARED = shared_trajectory_dir()


@pytest.mark.parametrize(
    ("window", "digest"),
    [(16_000, {}), (32_000, {}), (16_000, {"digest": True, "digest_form": "turns"})],
    ids=["16k", "32k", "16k-turns"],
)
def test_replayed_calls_satisfy_every_provider(window: int, digest: dict) -> None:
    assert SHARED is not None, "the shared transcripts are missing (../shared/data)"
    transcripts = load_trajectories(SHARED)
    assert len(transcripts) == 42
    found: dict[str, list[str]] = {}
    checked = over = 0
    policy = GuardPolicy(
        context_window=window, reserve_tokens=default_reserve(window), **digest
    )
    for name, messages in transcripts.items():
        guard = ContextGuard(policy)
        calls = [k for k, m in enumerate(messages) if isinstance(m, AIMessage)]
        for n, k in enumerate(calls):
            try:
                sent = guard.prepare(messages[:k]).messages
            except BudgetExceededError:
                over += 1  # the latest step alone exceeds the budget: nothing sent
                continue
            if n % EVERY and n != len(calls) - 1:
                continue
            checked += 1
            for provider, (build, check) in PROVIDERS.items():
                for error in check(build(sent)):
                    found.setdefault(provider, []).append(f"{name} call {k}: {error}")
    assert checked > 150
    assert over < 0.02 * len(transcripts) * 36
    assert found == {}
