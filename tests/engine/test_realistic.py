"""The engine on the 42 shared SWE-agent trajectories (skipped when absent)."""

from __future__ import annotations

import statistics

import pytest
from langchain_core.messages import AIMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy, TiktokenCounter
from langchain_context_guard.replay._transcripts import (
    load_trajectories,
    provider_prompt_tokens,
    shared_trajectory_dir,
)
from tests.engine._support import pairing_errors

DATA = shared_trajectory_dir()
pytestmark = pytest.mark.skipif(DATA is None, reason="shared trajectories absent")


@pytest.fixture(scope="module")
def trajectories():
    assert DATA is not None
    return load_trajectories(DATA)


def test_all_42_trajectories_load(trajectories):
    assert len(trajectories) == 42


@pytest.mark.parametrize(
    "window", [16_000, 32_000, 128_000], ids=["16k", "32k", "128k"]
)
def test_every_call_fits_with_valid_pairing(trajectories, window):
    counter = TiktokenCounter()
    policy = GuardPolicy(context_window=window, reserve_tokens=2_000)
    calls = trimmed = 0
    for name, messages in trajectories.items():
        guard = ContextGuard(policy, token_counter=counter)
        for k, message in enumerate(messages):
            if not isinstance(message, AIMessage):
                continue
            out = guard.prepare(messages[:k])
            report = out.report
            calls += 1
            trimmed += any(e.kind == "trim" for e in report.events)
            assert report.tokens_after <= report.budget, (name, k)
            assert pairing_errors(out.messages) == [], (name, k)
            assert isinstance(out.messages[0], SystemMessage)
            assert out.messages[1] is messages[1]  # the task
    assert calls > 1_000
    if window == 16_000:
        assert trimmed > 0


def test_anchored_counts_match_the_provider(trajectories):
    guard = ContextGuard(GuardPolicy(context_window=1_000_000, reserve_tokens=2_000))
    plain_guard = ContextGuard(  # tiktoken alone: no usage, no carried ratio
        GuardPolicy(
            context_window=1_000_000, reserve_tokens=2_000, usage_anchoring=False
        ),
        token_counter=guard.counter,
    )
    anchored, plain = [], []
    for messages in trajectories.values():
        bare = [m.model_copy(update={"usage_metadata": None}) for m in messages]
        for k, prompt in provider_prompt_tokens(messages):
            if k < 4:
                continue  # no usage before the second call
            anchored.append(guard.count_tokens(messages[:k]) / prompt - 1)
            plain.append(plain_guard.count_tokens(bare[:k]) / prompt - 1)
    assert abs(statistics.median(anchored)) < 0.001
    assert statistics.median(sorted(abs(e) for e in anchored)) < 0.005
    assert statistics.median(plain) < -0.03  # tiktoken alone undercounts
