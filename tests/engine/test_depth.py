"""The pruning depth: the cost model (``incremental._cost_model``) and its floor."""

from __future__ import annotations

import math

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from langchain_context_guard import ContextGuard, GuardPolicy, TiktokenCounter
from langchain_context_guard.engine._messages import assistant_count
from langchain_context_guard.engine.incremental._cost_model import (
    MIN_PRUNE_SHARE,
    cycle_cost,
    growth,
    prune_share,
)
from tests.engine._support import agent_history, lines

COUNTER = TiktokenCounter()


def _history(calls: int) -> list[BaseMessage]:
    return [HumanMessage("task"), *(AIMessage(f"step {k}") for k in range(calls))]


def test_without_a_growth_figure_the_cap_is_used() -> None:
    assert prune_share(0.7, None, 14_000) == 0.7


def test_the_share_follows_the_cost_model_below_the_cap() -> None:
    budget = 28_000
    expected = 1 - math.sqrt(2 * 900 / (0.9 * budget))
    share = prune_share(0.95, 900, budget)
    assert share == expected
    assert 0.7 < share < 0.8


def test_slow_growth_is_capped_and_fast_growth_floored() -> None:
    assert prune_share(0.7, 50, 120_000) == 0.7
    assert prune_share(0.7, 9_000, 17_000) == MIN_PRUNE_SHARE
    assert prune_share(0.2, 9_000, 17_000) == 0.2


def test_a_larger_budget_keeps_a_larger_share() -> None:
    small, large = prune_share(1.0, 600, 14_000), prune_share(1.0, 600, 28_000)
    assert MIN_PRUNE_SHARE < small < large < 1


def test_growth_is_the_history_per_assistant_message() -> None:
    assert growth(6_000, assistant_count(_history(3))) == 2_000
    assert growth(6_000, assistant_count(_history(0))) is None


def test_the_cycle_cost_is_lowest_at_the_share_the_model_picks() -> None:
    budget, g = 28_000, 900.0
    best = prune_share(1.0, g, budget) * budget
    costs = {kept: cycle_cost(kept, g, budget) for kept in range(0, budget, 250)}
    assert abs(min(costs, key=costs.__getitem__) - best) <= 250


def test_a_prompt_near_the_budget_costs_more_when_the_history_grows_fast() -> None:
    # Kept at 95% of the budget, the prompt is re-sent again within a call or two.
    assert cycle_cost(19_000, 1_500, 20_000) > cycle_cost(500, 1_500, 20_000)
    assert cycle_cost(19_000, 50, 20_000) < cycle_cost(500, 50, 20_000)


def test_a_head_over_the_target_is_pruned_as_deep_as_it_allows() -> None:
    """A system prompt over the share the cost model asks for: the floor it sets.

    The cut goes down to the system prompt, the task and the newest turn, not
    just under the budget: that would leave no room to grow, and every call
    after it would prune again, re-sending the prompt at full price.
    """
    policy = GuardPolicy(context_window=16_000, reserve_tokens=2_000, prune_to=0.5)
    guard = ContextGuard(policy, token_counter=COUNTER)
    history = agent_history(60, result_chars=1_200)
    history[0] = SystemMessage(lines(800, prefix="rule"), id="sys")
    head = sum(map(COUNTER.count_message, history[:2]))
    turn = sum(map(COUNTER.count_message, history[2:4]))
    assert 0.5 * 14_000 < head < 0.6 * 14_000  # the target is out of reach
    kept: list[int] = []
    previous: list[BaseMessage] | None = None
    for n in range(4, len(history) + 1, 2):
        result = guard.prepare(history[:n])
        assert result.report.tokens_after <= result.report.budget
        if previous is not None and result.messages[: len(previous)] != previous:
            kept.append(result.report.tokens_after)
        previous = result.messages
    assert kept
    assert max(kept) <= head + 2 * turn + 200, (head, turn, kept)
    assert len(kept) <= (len(history) - 2) // 2 * turn // (14_000 - head - 2 * turn) + 1
